package bedrock

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

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
	_, messages := toMessages("", msgs)
	var out []compacttest.Turn
	for _, m := range messages {
		turn := compacttest.Turn{Role: string(m.Role)}
		for _, b := range m.Content {
			switch block := b.(type) {
			case *types.ContentBlockMemberToolUse:
				turn.Calls = append(turn.Calls, aws.ToString(block.Value.ToolUseId))
			case *types.ContentBlockMemberToolResult:
				turn.Answers = append(turn.Answers, aws.ToString(block.Value.ToolUseId))
			}
		}
		out = append(out, turn)
	}
	return out
}
