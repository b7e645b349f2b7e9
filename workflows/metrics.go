package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/results"
)

// The turn's metrics go only through workflow.GetMetricsHandler, which
// records nothing while the workflow replays, so a turn replayed on
// another worker (or after a cache eviction) counts each event once. None
// of this emits a command.

// countEnd counts the turn's end by its status.
func (t *turn) countEnd(ctx workflow.Context) {
	metrics.Count(workflow.GetMetricsHandler(ctx), metrics.Turns, 1, map[string]string{
		metrics.Status: statusLabel(t.status),
	})
}

// countCompaction counts a compaction by strategy and reason.
func countCompaction(ctx workflow.Context, strategy, reason string) {
	metrics.Count(workflow.GetMetricsHandler(ctx), metrics.Compactions, 1, map[string]string{
		metrics.Strategy: metrics.OneOf(strategy, "summarize", "drop_oldest"),
		metrics.Reason:   metrics.OneOf(reason, compactThreshold, compactContextLength),
	})
}

// countCall counts a call that reached its final state, by tool and by
// how it ended.
func (t *turn) countCall(ctx workflow.Context, c *call) {
	metrics.Count(workflow.GetMetricsHandler(ctx), metrics.ToolCalls, 1, map[string]string{
		metrics.Tool:    t.toolLabel(c.card.Tool),
		metrics.Outcome: outcomeLabel(c.card),
	})
}

// timeWait starts timing a call's wait for a person; the function it
// returns, deferred, records the wait's length by what it waited for and
// counts the decision that ended it.
func (t *turn) timeWait(ctx workflow.Context, c *call) func() {
	kind := waitLabel(c.card.State)
	start := workflow.Now(ctx)
	return func() {
		h := workflow.GetMetricsHandler(ctx)
		metrics.Time(h, metrics.Wait, workflow.Now(ctx).Sub(start), map[string]string{metrics.WaitKind: kind})
		if n := len(c.card.Decisions); n > 0 {
			metrics.Count(h, metrics.Decisions, 1, map[string]string{
				metrics.Decision: decisionLabel(c.card.Decisions[n-1].Decision),
			})
		}
	}
}

// toolLabel is the call's tool when the turn offers it, UnknownTool
// otherwise: the tool names a model invents never become labels. The
// turn's tools are the worker's registered ones (DescribeTools refuses
// any other), so the label set is the registry's.
func (t *turn) toolLabel(name string) string {
	if _, ok := t.specs[name]; ok {
		return name
	}
	return metrics.UnknownTool
}

func statusLabel(s Status) string {
	return metrics.OneOf(string(s),
		string(StatusCompleted), string(StatusFailed), string(StatusCancelled),
		string(StatusTransferred), string(StatusMaxSteps), string(StatusBudgetExhausted), string(StatusRunning), string(StatusWaiting))
}

// outcomeLabel says how a final call ended: success or transfer, the
// failure's reason, or refused.
func outcomeLabel(card results.Card) string {
	switch card.State {
	case results.StateSucceeded:
		if card.Transfer != nil {
			return "transfer"
		}
		return "success"
	case results.StateRefused:
		return "refused"
	case results.StateFailed:
		if card.Failure != nil {
			return metrics.OneOf(string(card.Failure.Reason),
				string(results.FailureToolError), string(results.FailureInternal), string(results.FailureOutcomeUnknown))
		}
	}
	return metrics.Other
}

func waitLabel(s results.State) string {
	return metrics.OneOf(string(s),
		string(results.StatePendingApproval), string(results.StateWaitingAnswer), string(results.StateWaitingConnection))
}

func decisionLabel(d results.DecisionKind) string {
	return metrics.OneOf(string(d),
		string(results.DecisionApprove), string(results.DecisionDeny), string(results.DecisionAnswer),
		string(results.DecisionConnected), string(results.DecisionCancel), string(results.DecisionTimeout))
}
