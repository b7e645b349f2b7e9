package activities

import (
	"context"

	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/results"
)

// RunLocalToolName is the activity type of a tool call run as a local
// activity (tool.Spec.RunsLocally): RunTool itself, behind a check that
// this worker holds the workspace the call needs.
const RunLocalToolName = "RunLocalTool"

// ErrTypeWorkspaceElsewhere fails a local run on a worker that does not
// hold the turn's workspace; the workflow then sends the call to the
// workspace's own task queue as an ordinary activity.
const ErrTypeWorkspaceElsewhere = "WorkspaceElsewhere"

// LocalToolInput is one local run of a tool call.
type LocalToolInput struct {
	RunToolInput
	// Queue, when set, is the workspace task queue the call is pinned to:
	// the call runs here only if this worker polls that queue.
	Queue string `json:"queue,omitempty"`
}

// RunLocalTool is the RunLocalTool activity of a's tools on a worker whose
// own workspace queue is queue (empty: the workspace is shared, or not
// pinned). A local activity runs where the workflow task runs, which need
// not be the worker holding the workspace; the check answers that in the
// activity, so the choice is recorded in the local activity's marker and
// replays as made. (A function, not a method: every exported method of
// Activities is registered as an activity.)
func RunLocalTool(a *Activities, queue string) func(context.Context, LocalToolInput) (results.Outcome, error) {
	return func(ctx context.Context, in LocalToolInput) (results.Outcome, error) {
		if in.Queue != "" && in.Queue != queue {
			return activityError(in.TurnID+"/"+in.CallID, temporal.NewNonRetryableApplicationError(
				"this worker does not hold the turn's workspace", ErrTypeWorkspaceElsewhere, nil))
		}
		return a.RunTool(ctx, in.RunToolInput)
	}
}
