package workflows

import (
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/results"
)

// Webhook events go out through DeliveryWorkflow (delivery.go), one small
// workflow per event that the turn starts and abandons: a turn that ends
// does not wait for a receiver that is down, and the receiver still gets
// the event when it comes back.

// emit starts the delivery of one event. The event's id is the
// webhook-id receivers deduplicate by, and the delivery workflow's id, so
// it is fixed by the run, the event and the call's wait.
func (t *turn) emit(ctx workflow.Context, typ, key string, card *results.Card) {
	if !t.features.Webhooks {
		return
	}
	// Named by the run, not the turn id: run ids are unique across turns
	// and runs, and a replayer knows the run id (it is in the history)
	// but not the workflow id.
	e := webhook.Event{
		ID:   fmt.Sprintf("%s/%s/%s", workflow.GetInfo(ctx).WorkflowExecution.RunID, typ, key),
		Type: typ,
		Turn: t.id,
		User: t.in.User,
		Card: card,
		At:   workflow.Now(ctx),
	}
	if t.v >= childBudgetVersion {
		e.ParentTurn, e.ParentCall = t.callerOf(ctx)
	}
	if typ == webhook.TypeTurnEnded {
		e.Status = string(t.status)
		e.Text = clipBytes(t.text, webhook.MaxText)
	}
	// Disconnected: a cancelled turn still announces its cancelled calls
	// and its end.
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	t.deliveries++
	workflow.Go(ctx, func(ctx workflow.Context) {
		defer func() { t.deliveries-- }()
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:        e.ID,
			ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
			StaticSummary:     clip(typ + " " + key),
		})
		// Waiting for the start, not the delivery: once started the child
		// outlives the turn.
		err := workflow.ExecuteChildWorkflow(cctx, DeliveryWorkflowName, e).GetChildWorkflowExecution().Get(ctx, nil)
		if err != nil {
			workflow.GetLogger(ctx).Warn("Webhook delivery not started", "event", e.ID, "error", err)
		}
	})
}

// emitWaiting and emitDecided announce a call's wait and its end; n
// numbers the call's waits.
func (t *turn) emitWaiting(ctx workflow.Context, c *call) {
	card := c.card
	t.emit(ctx, webhook.TypeCallWaiting, fmt.Sprintf("%s/%d", card.CallID, c.applied+1), &card)
}

func (t *turn) emitDecided(ctx workflow.Context, c *call) {
	card := c.card
	t.emit(ctx, webhook.TypeCallDecided, fmt.Sprintf("%s/%d", card.CallID, c.applied), &card)
}
