package workflows_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/tollgate-dev/tollgate/internal/webhooktest"
	"net/http"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

var webhookSecret = []byte("0123456789abcdef0123456789abcdef")

func newDeliverer(t *testing.T, urls ...string) *webhook.Deliverer {
	t.Helper()
	d, err := webhook.New(webhook.Options{URLs: urls, Secret: webhookSecret})
	require.NoError(t, err)
	return d
}

func waitingEvent() webhook.Event {
	return webhook.Event{
		ID:   "turn-1/call.waiting/call_1/1",
		Type: webhook.TypeCallWaiting,
		Turn: "turn-1",
		Run:  "run-1",
		User: "ana",
		Card: &results.Card{CallID: "call_1", Tool: "write_file", Arguments: json.RawMessage(`{"path":"a.txt"}`), State: results.StatePendingApproval},
		At:   time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC),
	}
}

// deliver runs DeliveryWorkflow with d's activity on the test suite,
// retries and heartbeat details included, as a worker would.
func deliver(t *testing.T, d *webhook.Deliverer, e webhook.Event) error {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	d.Register(env)
	env.RegisterWorkflowWithOptions(workflows.DeliveryWorkflow, workflow.RegisterOptions{Name: workflows.DeliveryWorkflowName})
	env.ExecuteWorkflow(workflows.DeliveryWorkflowName, e)
	require.True(t, env.IsWorkflowCompleted())
	return env.GetWorkflowError()
}

func TestReceiverDownThreeTimesGetsTheFourthAttempt(t *testing.T) {
	rcv := webhooktest.NewReceiver(t, http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusBadGateway)
	require.NoError(t, deliver(t, newDeliverer(t, rcv.URL), waitingEvent()))

	got := rcv.Deliveries()
	require.Len(t, got, 4)
	// Checked as a receiver would: with the spec library, configured from
	// the whsec_ string an operator hands out.
	wh, err := standardwebhooks.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString(webhookSecret))
	require.NoError(t, err)
	for _, d := range got {
		require.Equal(t, "turn-1/call.waiting/call_1/1", d.Header.Get("webhook-id"), "receivers drop duplicates by this id")
		require.Equal(t, got[0].Body, d.Body)
		require.NoError(t, wh.Verify(d.Body, d.Header))
	}
}

func TestGoodReceiverIsNotDeliveredTwice(t *testing.T) {
	good := webhooktest.NewReceiver(t)
	flaky := webhooktest.NewReceiver(t, http.StatusInternalServerError, http.StatusTooManyRequests)
	require.NoError(t, deliver(t, newDeliverer(t, good.URL, flaky.URL), waitingEvent()))
	require.Equal(t, 1, good.Count())
	require.Equal(t, 3, flaky.Count())
}

func TestReceiverGoneStopsOnlyItself(t *testing.T) {
	good := webhooktest.NewReceiver(t, http.StatusInternalServerError)
	gone := webhooktest.NewReceiver(t, http.StatusGone)
	err := deliver(t, newDeliverer(t, good.URL, gone.URL), waitingEvent())
	require.Equal(t, 2, good.Count(), "the other receiver still gets its retry")
	require.Equal(t, 1, gone.Count(), "a receiver that answered 410 is not asked again")
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, webhook.ErrTypeReceiverGone, appErr.Type())
	require.Contains(t, appErr.Error(), "410 Gone")
}

func TestReceiverDownForAnHourGetsTheEvent(t *testing.T) {
	// DeliveryActivityOptions back off from 5s to every 10 minutes: 12
	// failures span more than an hour of workflow time, well inside the
	// day the policy retries for. The test suite caps attempts at 10 when
	// a policy sets no maximum (production's is unlimited), so this
	// workflow lifts that cap and changes nothing else.
	failures := make([]int, 12)
	for i := range failures {
		failures[i] = http.StatusBadGateway
	}
	rcv := webhooktest.NewReceiver(t, failures...)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	newDeliverer(t, rcv.URL).Register(env)
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, e webhook.Event) error {
		o := workflows.DeliveryActivityOptions()
		p := *o.RetryPolicy
		p.MaximumAttempts = 100
		o.RetryPolicy = &p
		ctx = workflow.WithActivityOptions(ctx, o)
		return workflow.ExecuteActivity(ctx, webhook.DeliverName, e).Get(ctx, nil)
	}, workflow.RegisterOptions{Name: "uncapped"})
	start := env.Now()
	env.ExecuteWorkflow("uncapped", waitingEvent())
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, 13, rcv.Count())
	elapsed := env.Now().Sub(start)
	require.Greater(t, elapsed, time.Hour)
	require.Less(t, elapsed, 2*time.Hour, "retries keep coming every 10 minutes")
	t.Logf("delivered on attempt 13 after %s of workflow time", elapsed)
}

// The delivery workflow names the run of the turn that started it.
func TestDeliveryWorkflowNamesTheParentRun(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var got webhook.Event
	env.RegisterActivityWithOptions(func(_ context.Context, e webhook.Event) error {
		got = e
		return nil
	}, activity.RegisterOptions{Name: webhook.DeliverName})
	env.RegisterWorkflowWithOptions(workflows.DeliveryWorkflow, workflow.RegisterOptions{Name: workflows.DeliveryWorkflowName})
	var parentRun string
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		parentRun = workflow.GetInfo(ctx).WorkflowExecution.RunID
		e := waitingEvent()
		e.Run = ""
		return workflow.ExecuteChildWorkflow(ctx, workflows.DeliveryWorkflowName, e).Get(ctx, nil)
	})
	require.NoError(t, env.GetWorkflowError())
	require.NotEmpty(t, parentRun)
	require.Equal(t, parentRun, got.Run)
}
