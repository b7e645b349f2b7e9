package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities/webhook"
)

// DeliveryWorkflowName is the workflow type of DeliveryWorkflow.
const DeliveryWorkflowName = "DeliverWebhookEvent"

// DeliveryActivityOptions are the options webhook.Deliver is meant to
// run with: an attempt sends to all receivers at once, each bounded by
// webhook.Options.Timeout (keep that under StartToCloseTimeout); failed
// attempts back off from 5 seconds to every 10 minutes, for a day, so a
// receiver that is down for hours still gets the event.
func DeliveryActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        5 * time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Minute,
			NonRetryableErrorTypes: []string{webhook.ErrTypeBadEvent, webhook.ErrTypeReceiverGone},
		},
	}
}

// DeliveryWorkflow delivers one event with DeliveryActivityOptions. The
// turn starts it as a child (webhook.go) with PARENT_CLOSE_POLICY_ABANDON
// and the event's ID as its workflow id: the turn can end without waiting
// for slow receivers, and a second start for the same event is refused by
// Temporal instead of sending twice.
//
// The event's Run, when the turn did not set it, is the run of the turn
// that started this workflow, so the links it carries are bound to it.
// Only the activity's input changes with it, which replay does not
// compare, so deliveries in flight replay as before.
func DeliveryWorkflow(ctx workflow.Context, e webhook.Event) error {
	if p := workflow.GetInfo(ctx).ParentWorkflowExecution; e.Run == "" && p != nil {
		e.Run = p.RunID
	}
	ctx = workflow.WithActivityOptions(ctx, DeliveryActivityOptions())
	return workflow.ExecuteActivity(ctx, webhook.DeliverName, e).Get(ctx, nil)
}
