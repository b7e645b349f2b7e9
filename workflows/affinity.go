package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// DefaultWorkspaceTimeout is how long a call of a workspace tool waits for
// the worker holding the turn's workspace to take it, unless
// policy.workspace_timeout says otherwise.
const DefaultWorkspaceTimeout = time.Minute

func (p Policy) workspaceTimeout() time.Duration {
	if p.WorkspaceTimeout > 0 {
		return time.Duration(p.WorkspaceTimeout)
	}
	return DefaultWorkspaceTimeout
}

// workspaceUnavailable is the tool error of a call no workspace worker
// took. It names no worker, queue or host: the model reads it.
func workspaceUnavailable(waited time.Duration) string {
	return fmt.Sprintf("the workspace's worker is unavailable: no worker holding this turn's workspace took the call within %s, so it did not run to completion. "+
		"Later calls run on another worker, whose workspace may not hold what earlier calls read or wrote; check before relying on it.", formatDuration(waited))
}

// repin moves the turn's workspace to the worker running this workflow
// task, after a call pinned to lost found no worker. Calls of one step
// that all timed out move it once. The new queue comes from a SideEffect:
// which worker runs a workflow task is not deterministic, what it recorded
// is. The working directory belonged to the old workspace, so it resets.
func (t *turn) repin(ctx workflow.Context, lost string) {
	if t.pin != lost {
		return
	}
	var queue string
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return t.live.WorkspaceQueue }).Get(&queue); err != nil {
		// A SideEffect value is what this code wrote; unreadable means
		// the history is not ours. Let any worker run workspace tools.
		workflow.GetLogger(ctx).Warn("Recorded workspace queue unreadable; unpinning the workspace", "error", err)
		queue = ""
	}
	t.pin, t.workDir = queue, ""
}
