package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
)

// toolsRefVersion of the turn's change marker sends the tool definitions
// with the turn's first model call alone: that call stores them
// (CallModelInput.StoreTools) and the later ones name them by reference.
// The definitions were the same in every call's input, in history; an
// agent with an MCP server's dozens of tools carried tens of kilobytes of
// schemas per call, each kilobyte about 0.6% of a tool call's time
// (bench row 1b). A reference the store lost is answered by sending the
// definitions again (runCallModel).
const toolsRefVersion = inlineTailVersion + 1

// offerTools fills in how in carries the turn's tool definitions: by the
// reference an earlier call of this run returned, or whole, asking the
// call to store them when the turn's version does.
func (t *turn) offerTools(in *activities.CallModelInput) {
	in.Tools, in.ToolsRef, in.StoreTools = t.defs, "", false
	if t.v < toolsRefVersion || len(t.defs) == 0 {
		return
	}
	if t.toolsRef != "" {
		in.Tools, in.ToolsRef = nil, t.toolsRef
		return
	}
	in.StoreTools = true
}

// runCallModel runs CallModel with in, and once more with the tool
// definitions whole when the stored ones in named are gone.
func (t *turn) runCallModel(ctx, actx workflow.Context, in *activities.CallModelInput, res *activities.CallModelResult) error {
	err := workflow.ExecuteActivity(actx, activities.CallModelName, *in).Get(ctx, res)
	var appErr *temporal.ApplicationError
	if in.ToolsRef == "" || !errors.As(err, &appErr) || appErr.Type() != activities.ErrTypeToolsMissing {
		return err
	}
	workflow.GetLogger(ctx).Warn("Stored tool definitions missing; sending them again")
	t.toolsRef = ""
	t.offerTools(in)
	return workflow.ExecuteActivity(actx, activities.CallModelName, *in).Get(ctx, res)
}
