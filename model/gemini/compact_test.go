package gemini

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
	compacttest.Run(t, compacttest.Rules{Alternate: true}, compactTurns)
}

func compactTurns(t *testing.T, msgs []results.Message) []compacttest.Turn {
	contents, _, err := Params(model.Request{Model: "m", Messages: msgs})
	require.NoError(t, err)
	var out []compacttest.Turn
	for _, c := range contents {
		w := compacttest.Wire(t, c)
		turn := compacttest.Turn{Role: compacttest.Str(w["role"])}
		if turn.Role == "model" {
			turn.Role = "assistant"
		}
		for _, p := range compacttest.List(w["parts"]) {
			part := compacttest.Obj(p)
			if fc := compacttest.Obj(part["functionCall"]); fc != nil {
				turn.Calls = append(turn.Calls, compacttest.Str(fc["id"]))
			}
			if fr := compacttest.Obj(part["functionResponse"]); fr != nil {
				turn.Answers = append(turn.Answers, compacttest.Str(fr["id"]))
			}
		}
		out = append(out, turn)
	}
	return out
}
