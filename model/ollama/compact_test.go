package ollama

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
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

func compactTurns(t *testing.T, msgs []results.Message) []compacttest.Turn {
	chat, err := Params(model.Request{Model: "m", Messages: msgs})
	require.NoError(t, err)
	var out []compacttest.Turn
	for _, m := range chat.Messages {
		w := obj(wire(t, m))
		turn := compacttest.Turn{Role: str(w["role"])}
		for _, c := range list(w["tool_calls"]) {
			turn.Calls = append(turn.Calls, str(obj(c)["id"]))
		}
		if id := str(w["tool_call_id"]); id != "" {
			turn.Answers = []string{id}
		}
		out = append(out, turn)
	}
	return out
}
