package anthropic

import (
	"testing"

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
	_, params := toMessages("", msgs)
	var out []compacttest.Turn
	for _, m := range params {
		w := compacttest.Wire(t, m)
		turn := compacttest.Turn{Role: compacttest.Str(w["role"])}
		for _, b := range compacttest.List(w["content"]) {
			switch block := compacttest.Obj(b); compacttest.Str(block["type"]) {
			case "tool_use":
				turn.Calls = append(turn.Calls, compacttest.Str(block["id"]))
			case "tool_result":
				turn.Answers = append(turn.Answers, compacttest.Str(block["tool_use_id"]))
			}
		}
		out = append(out, turn)
	}
	return out
}
