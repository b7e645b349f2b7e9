package pricing

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
)

func TestCost(t *testing.T) {
	tab := Default()
	// 1M input of which 400k cached, 100k output on gpt-4.1:
	// 0.6*2 + 0.4*0.5 + 0.1*8 = 2.2 dollars.
	cost, ok := tab.Cost("openai:gpt-4.1", model.Usage{InputTokens: 1_000_000, CachedTokens: 400_000, OutputTokens: 100_000})
	require.True(t, ok)
	require.InDelta(t, 2.2, cost, 1e-9)
}

func TestLookup(t *testing.T) {
	tab := Default()
	cases := []struct {
		model string
		want  string // key whose price it must have; "" means unknown
	}{
		{"openai:gpt-4.1", "openai:gpt-4.1"},
		{"openai:gpt-4.1-mini", "openai:gpt-4.1-mini"}, // not gpt-4.1's price
		{"openai:gpt-4.1-2025-04-14", "openai:gpt-4.1"},
		{"anthropic:claude-sonnet-4-5-20250929", "anthropic:claude-sonnet-4-5"},
		{"responses:gpt-4.1", "openai:gpt-4.1"},
		{"vertex:gemini-2.5-pro", "gemini:gemini-2.5-pro"},
		{"bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock:anthropic.claude-sonnet-4-5"},
		{"bedrock:amazon.nova-pro-v1:0", "bedrock:amazon.nova-pro"},
		{"ollama:llama3.2", "ollama:*"},
		{"scripted:demo", "scripted:*"},
		{"openai:gpt-4.10", ""}, // a prefix is matched only at a boundary
		{"openai:some-new-model", ""},
		{"mistral:large", ""},
		{"not a model", ""},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			got, ok := tab.Lookup(tc.model)
			if tc.want == "" {
				require.False(t, ok)
				cost, known := tab.Cost(tc.model, model.Usage{InputTokens: 10})
				require.False(t, known, "an unknown price is not reported as free")
				require.Zero(t, cost)
				return
			}
			require.True(t, ok)
			require.Equal(t, defaults[tc.want], got)
		})
	}
}

func TestOverrideFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prices.json")
	require.NoError(t, os.WriteFile(path, []byte(`{
	  "openai:gpt-4.1": {"input": 1, "output": 4},
	  "acme:*": {"input": 0.5, "output": 1, "cached_input": 0.1}
	}`), 0o600))
	t.Setenv(FileVar, path)
	tab, err := FromEnv()
	require.NoError(t, err)
	p, ok := tab.Lookup("openai:gpt-4.1")
	require.True(t, ok)
	require.Equal(t, Price{Input: 1, Output: 4, CachedInput: 1}, p, "without cached_input, cached tokens cost what input costs")
	p, ok = tab.Lookup("acme:model-7")
	require.True(t, ok)
	require.Equal(t, Price{Input: 0.5, Output: 1, CachedInput: 0.1}, p)
	_, ok = tab.Lookup("anthropic:claude-sonnet-4-5")
	require.True(t, ok, "the defaults stay under the file")
	require.Equal(t, Price{Input: 2, CachedInput: 0.5, Output: 8}, Default().prices["openai:gpt-4.1"], "Default is not changed by a merge")
}

func TestBadFiles(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":       `{`,
		"missing output": `{"openai:x": {"input": 1}}`,
		"negative":       `{"openai:x": {"input": -1, "output": 1}}`,
		"bad key":        `{"gpt-4.1": {"input": 1, "output": 1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.json")
			require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
			t.Setenv(FileVar, path)
			_, err := FromEnv()
			require.Error(t, err)
			require.Contains(t, err.Error(), FileVar)
		})
	}
	t.Setenv(FileVar, filepath.Join(t.TempDir(), "missing.json"))
	_, err := FromEnv()
	require.ErrorContains(t, err, "cannot read")
}

func TestZeroTable(t *testing.T) {
	var tab *Table
	_, ok := tab.Cost("openai:gpt-4.1", model.Usage{})
	require.False(t, ok)
}
