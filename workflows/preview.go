package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/results"
)

// preview puts on a card waiting for approval what the call would change
// (the diff of a write or an edit), for the person deciding. It waits for
// the preview unless the answer comes first; a preview that fails or is
// lost leaves a note instead, never a failed call.
func (t *turn) preview(ctx workflow.Context, c *call) {
	if t.v < outsideVersion || !c.spec.Previews || c.card.State != results.StatePendingApproval || c.runs > 0 || c.card.Preview != nil || c.card.PreviewNote != "" {
		return
	}
	pctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	pctx = workflow.WithActivityOptions(pctx, workflow.ActivityOptions{
		StartToCloseTimeout: activities.PreviewTimeout + 5*time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:             "preview " + callSummary(c.card.Tool, c.card.Arguments),
	})
	if queue := t.queueFor(c); queue != "" {
		// The preview reads the workspace, so it runs where the call
		// will; with that worker gone the card gets the lost note.
		pctx = workflow.WithTaskQueue(pctx, queue)
		pctx = workflow.WithScheduleToStartTimeout(pctx, t.in.Policy.workspaceTimeout())
	}
	f := workflow.ExecuteActivity(pctx, activities.PreviewToolName, activities.PreviewToolInput{
		TurnID:    t.id,
		CallID:    c.card.CallID,
		Tool:      c.card.Tool,
		Arguments: c.card.Arguments,
		WorkDir:   t.workDir,
		User:      t.in.User,
	})
	if err := workflow.Await(ctx, func() bool { return f.IsReady() || c.pending != nil }); err != nil || !f.IsReady() {
		return
	}
	var res activities.PreviewToolResult
	if err := f.Get(ctx, &res); err != nil {
		c.card.PreviewNote = activities.PreviewLostNote
		return
	}
	c.card.Preview, c.card.PreviewNote = res.Diffs, res.Reason
}
