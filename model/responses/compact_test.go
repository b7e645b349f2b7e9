package responses

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model/compact/compacttest"
	"github.com/tollgate-dev/tollgate/results"
)

// TestCompactedConversationPairsToolCalls encodes every compaction of a
// conversation as this provider sends it and checks the API's rules on
// tool calls and their results.
func TestCompactedConversationPairsToolCalls(t *testing.T) {
	require.Error(t, compacttest.Check(compactTurns(t, compacttest.Broken()), compactRules), "the check catches a result without its call")
	for _, c := range compacttest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			require.NoError(t, compacttest.Check(compactTurns(t, c.Messages), compactRules))
		})
	}
}

// wire decodes v's JSON encoding into a generic tree.
func wire(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

var _ = results.RoleUser

var compactRules = compacttest.Rules{}

// compactTurns reads the input items: an assistant message's text and
// its function_call items are one assistant turn.
func compactTurns(t *testing.T, msgs []results.Message) []compacttest.Turn {
	var out []compacttest.Turn
	for _, item := range inputItems(msgs) {
		w := obj(wire(t, item))
		switch str(w["type"]) {
		case "function_call":
			if n := len(out); n > 0 && out[n-1].Role == "assistant" {
				out[n-1].Calls = append(out[n-1].Calls, str(w["call_id"]))
				continue
			}
			out = append(out, compacttest.Turn{Role: "assistant", Calls: []string{str(w["call_id"])}})
		case "function_call_output":
			out = append(out, compacttest.Turn{Role: "tool", Answers: []string{str(w["call_id"])}})
		default:
			out = append(out, compacttest.Turn{Role: str(w["role"])})
		}
	}
	return out
}
