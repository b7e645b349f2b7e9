package builtin

import (
	"context"
	"strings"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

type handoffArgs struct {
	Target  string `json:"target" jsonschema:"the agent to hand the conversation to"`
	Message string `json:"message,omitempty" jsonschema:"what the next agent should know"`
}

func handoffTool(Options) (tool.Tool, error) {
	return tool.Func(tool.Spec{
		Name:        Handoff,
		Description: "Hand the conversation to another agent. The turn ends once this step's other calls are done; the message goes to the next agent.",
		Idempotent:  true,
	}, func(ctx context.Context, call tool.Call, args handoffArgs) (results.Outcome, error) {
		target := strings.TrimSpace(args.Target)
		if target == "" {
			return results.FailTool("target is empty"), nil
		}
		return results.TransferTo(target, args.Message), nil
	})
}
