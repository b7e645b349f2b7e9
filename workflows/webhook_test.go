package workflows

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/results"
)

type delivered struct {
	mu     sync.Mutex
	events []webhook.Event
}

func (d *delivered) deliver(_ context.Context, e webhook.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, e)
	return nil
}

func withWebhooks(h *harness) *delivered {
	d := &delivered{}
	h.env.RegisterWorkflowWithOptions(DeliveryWorkflow, workflow.RegisterOptions{Name: DeliveryWorkflowName})
	h.env.RegisterActivityWithOptions(d.deliver, activity.RegisterOptions{Name: webhook.DeliverName})
	return d
}

// A turn announces each wait, each decision and its end, each event once
// and under its own id.
func TestWebhookEventsForWaitsDecisionsAndTheEnd(t *testing.T) {
	h := newHarnessWith(t, Features{Webhooks: true},
		calls("", tc("w1", "write", `{"path":"a.md","content":"b"}`)),
		results.AssistantText("written"))
	d := withWebhooks(h)
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "ann"}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}, User: "ann"})
	require.Equal(t, StatusCompleted, res.Status)

	require.Len(t, d.events, 3)
	ids := map[string]bool{}
	byType := map[string]webhook.Event{}
	for _, e := range d.events {
		byType[e.Type] = e
		require.Equal(t, "default-test-workflow-id", e.Turn)
		require.Equal(t, "ann", e.User)
		require.False(t, ids[e.ID], "event ids are unique: %s", e.ID)
		ids[e.ID] = true
	}
	waiting, decided, ended := byType[webhook.TypeCallWaiting], byType[webhook.TypeCallDecided], byType[webhook.TypeTurnEnded]
	require.Equal(t, results.StatePendingApproval, waiting.Card.State)
	require.Equal(t, "w1", waiting.Card.CallID)

	require.Len(t, decided.Card.Decisions, 1)
	require.Equal(t, "ann", decided.Card.Decisions[0].By)

	require.Equal(t, string(StatusCompleted), ended.Status)
	require.Equal(t, "written", ended.Text)
	require.Nil(t, ended.Card)
}

// A cancelled turn still announces the decision that ended its wait and
// its end.
func TestWebhookEventsOfACancelledTurn(t *testing.T) {
	h := newHarnessWith(t, Features{Webhooks: true}, calls("", tc("w1", "write", `{"path":"a.md","content":"b"}`)))
	d := withWebhooks(h)
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Minute)
	h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

	// Each event is its own delivery, so receivers may see them in any
	// order; they carry the workflow time they happened at.
	byType := map[string]webhook.Event{}
	for _, e := range d.events {
		byType[e.Type] = e
	}
	require.Len(t, d.events, 3)
	require.Len(t, byType, 3)
	require.Equal(t, results.DecisionCancel, byType[webhook.TypeCallDecided].Card.Decisions[0].Decision)
	require.Equal(t, string(StatusCancelled), byType[webhook.TypeTurnEnded].Status)
}

// Without webhooks configured, a turn starts no deliveries.
func TestNoWebhookEventsWithoutTheFeature(t *testing.T) {
	h := newHarness(t, calls("", tc("w1", "write", `{"path":"a.md","content":"b"}`)), results.AssistantText("ok"))
	d := withWebhooks(h)
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove}, nil)
	h.run(t, Input{Prompt: "p", Tools: []string{"write"}})
	require.Empty(t, d.events)
}
