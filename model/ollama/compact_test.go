package ollama

import (
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
	compacttest.Run(t, compacttest.Rules{}, compactTurns)
}

func compactTurns(t *testing.T, msgs []results.Message) []compacttest.Turn {
	chat, err := Params(model.Request{Model: "m", Messages: msgs})
	require.NoError(t, err)
	var out []compacttest.Turn
	for _, m := range chat.Messages {
		w := compacttest.Wire(t, m)
		turn := compacttest.Turn{Role: compacttest.Str(w["role"])}
		for _, c := range compacttest.List(w["tool_calls"]) {
			turn.Calls = append(turn.Calls, compacttest.Str(compacttest.Obj(c)["id"]))
		}
		if id := compacttest.Str(w["tool_call_id"]); id != "" {
			turn.Answers = []string{id}
		}
		out = append(out, turn)
	}
	return out
}
