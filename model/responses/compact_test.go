package responses

import (
	"testing"

	"github.com/tollgate-dev/tollgate/model/compact/compacttest"
	"github.com/tollgate-dev/tollgate/results"
)

// TestCompactedConversationPairsToolCalls encodes every compaction of a
// conversation as this provider sends it and checks the API's rules on
// tool calls and their results.
func TestCompactedConversationPairsToolCalls(t *testing.T) {
	compacttest.Run(t, compacttest.Rules{}, compactTurns)
}

// compactTurns reads the input items: an assistant message's text and
// its function_call items are one assistant turn.
func compactTurns(t *testing.T, msgs []results.Message) []compacttest.Turn {
	var out []compacttest.Turn
	for _, item := range inputItems(msgs) {
		w := compacttest.Wire(t, item)
		switch compacttest.Str(w["type"]) {
		case "function_call":
			if n := len(out); n > 0 && out[n-1].Role == "assistant" {
				out[n-1].Calls = append(out[n-1].Calls, compacttest.Str(w["call_id"]))
				continue
			}
			out = append(out, compacttest.Turn{Role: "assistant", Calls: []string{compacttest.Str(w["call_id"])}})
		case "function_call_output":
			out = append(out, compacttest.Turn{Role: "tool", Answers: []string{compacttest.Str(w["call_id"])}})
		default:
			out = append(out, compacttest.Turn{Role: compacttest.Str(w["role"])})
		}
	}
	return out
}
