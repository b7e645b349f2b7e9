package workflows

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/results"
)

// callModelQueues records the task queue of every CallModel the turn
// scheduled; the test environment's own queue is "".
func callModelQueues(h *harness) func() []string {
	var mu sync.Mutex
	var queues []string
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name != activities.CallModelName {
			return
		}
		q := info.TaskQueue
		if q == "default-test-taskqueue" {
			q = ""
		}
		mu.Lock()
		queues = append(queues, q)
		mu.Unlock()
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), queues...)
	}
}

func TestModelCallsGoToTheirProvidersQueue(t *testing.T) {
	f := Features{ModelQueues: map[string]string{"fake": "tq/model/fake"}}
	h := newHarnessWith(t, f, calls("", tc("c1", "echo", `{"text":"hi"}`)), results.AssistantText("done"))
	queues := callModelQueues(h)
	res := h.run(t, Input{Prompt: "go", Tools: []string{"echo"}})
	require.Equal(t, StatusCompleted, res.Status, res.Error)
	require.Equal(t, []string{"tq/model/fake", "tq/model/fake"}, queues())
}

func TestModelCallsOfOtherProvidersStayOnTheTurnsQueue(t *testing.T) {
	f := Features{ModelQueues: map[string]string{"openai": "tq/model/openai"}}
	h := newHarnessWith(t, f, results.AssistantText("done"))
	queues := callModelQueues(h)
	res := h.run(t, Input{Prompt: "go"})
	require.Equal(t, StatusCompleted, res.Status, res.Error)
	require.Equal(t, []string{""}, queues())
}
