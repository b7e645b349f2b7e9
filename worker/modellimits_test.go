package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseModelLimits(t *testing.T) {
	got, err := parseModelLimits(" openai=5/8, anthropic=0.5 ,")
	require.NoError(t, err)
	require.Equal(t, []modelLimit{{provider: "openai", perSecond: 5, inFlight: 8}, {provider: "anthropic", perSecond: 0.5}}, got)

	got, err = parseModelLimits("")
	require.NoError(t, err)
	require.Empty(t, got)

	for _, bad := range []string{"openai", "openai=0", "openai=x", "openai=5/0", "openai=5/x", "=5", "a:b=1", "openai=1,openai=2"} {
		_, err := parseModelLimits(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), ModelLimitsVar, bad)
	}
}
