package workflows

import (
	"fmt"
	"strings"
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

// continueIn pins the turn to the workspace queue the turn before it
// ended on (Input.Workspace), so a conversation's files stay where its
// earlier calls wrote them. Input is the caller's, so only a workspace
// queue of this turn's own task queue is taken: a turn cannot be sent to
// poll-less or foreign queues by name. Should that worker be gone, the
// first call waits policy.workspace_timeout and the turn re-pins.
func (t *turn) continueIn(ctx workflow.Context, queue string) {
	prefix := workflow.GetInfo(ctx).TaskQueueName + "/ws/"
	if !strings.HasPrefix(queue, prefix) || len(queue) == len(prefix) || len(queue) > maxTaskQueueBytes {
		workflow.GetLogger(ctx).Warn("Input.Workspace is not a workspace queue of this task queue; the turn pins its own", "task_queue_prefix", prefix)
		return
	}
	t.pin = queue
}

// maxTaskQueueBytes is the longest task queue name the server accepts.
const maxTaskQueueBytes = 1000
