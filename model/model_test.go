package model

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseName(t *testing.T) {
	tests := []struct {
		in, provider, name string
		ok                 bool
	}{
		{"openai:gpt-4.1", "openai", "gpt-4.1", true},
		{"openai:llama3:8b", "openai", "llama3:8b", true},
		{"scripted:path/to/s.json", "scripted", "path/to/s.json", true},
		{"gpt-4.1", "", "", false},
		{":x", "", "", false},
		{"openai:", "", "", false},
	}
	for _, tt := range tests {
		p, n, err := ParseName(tt.in)
		if !tt.ok {
			require.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, [2]string{tt.provider, tt.name}, [2]string{p, n})
	}
}

func TestAsError(t *testing.T) {
	classified := &Error{Status: 401, Message: "no"}
	require.Same(t, classified, AsError(fmt.Errorf("call: %w", classified)))
	require.Equal(t, "model provider returned 401: no", classified.Error())

	e := AsError(errors.New("connection reset"))
	require.True(t, e.Retryable)
	require.Equal(t, "model provider: connection reset", e.Error())
}
