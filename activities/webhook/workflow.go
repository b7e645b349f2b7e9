package webhook

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// DeliveryWorkflowName is the workflow type of DeliveryWorkflow.
const DeliveryWorkflowName = "DeliverWebhookEvent"

// ActivityOptions are the options Deliver is meant to run with: an attempt
// sends to all receivers at once, each bounded by Options.Timeout (keep
// that under StartToCloseTimeout); failed attempts back off from 5 seconds
// to every 10 minutes, for a day, so a receiver that is down for hours
// still gets the event.
func ActivityOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        5 * time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Minute,
			NonRetryableErrorTypes: []string{ErrTypeBadEvent, ErrTypeReceiverGone},
		},
	}
}

// DeliveryWorkflow delivers one event with ActivityOptions. Started as a
// child with PARENT_CLOSE_POLICY_ABANDON and the event's ID as its
// workflow id, it lets a turn end without waiting for slow receivers, and
// a second start for the same event is refused by Temporal instead of
// sending twice.
//
// The event's Run, when the turn did not set it, is the run of the turn
// that started this workflow, so the links it carries are bound to it.
// Only the activity's input changes with it, which replay does not
// compare, so deliveries in flight replay as before.
func DeliveryWorkflow(ctx workflow.Context, e Event) error {
	if p := workflow.GetInfo(ctx).ParentWorkflowExecution; e.Run == "" && p != nil {
		e.Run = p.RunID
	}
	ctx = workflow.WithActivityOptions(ctx, ActivityOptions())
	return workflow.ExecuteActivity(ctx, DeliverName, e).Get(ctx, nil)
}
