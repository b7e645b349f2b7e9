package tollgate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/internal/devserver"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// startsModel answers at once and records when each call started and
// on which task queue.
type startsModel struct {
	mu     sync.Mutex
	starts []time.Time
	queues map[string]int
}

func (m *startsModel) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.starts = append(m.starts, time.Now())
	m.queues[activity.GetInfo(ctx).TaskQueue]++
	return model.Response{Message: results.AssistantText("ok"), StopReason: model.StopEnd}, nil
}

// A provider's calls routed to their own task queue are rate limited by
// the server for that queue: six turns' calls at two per second cannot
// all start within a second, and none runs on the turns' queue.
func TestModelCallsAreRateLimitedOnTheirQueue(t *testing.T) {
	c := startDevServer(t, devserver.Options{})
	const tq = "limits"
	m := &startsModel{queues: map[string]int{}}
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		DataDir: t.TempDir(), Workspace: t.TempDir(), NoBuiltins: true,
		Providers: map[string]tollgate.Provider{"counted": m},
	})
	require.NoError(t, err)
	queue := tollgate.ModelQueue(tq, "counted")
	require.NoError(t, plugin.RouteModelCalls("counted", queue))

	mw := worker.New(c, queue, worker.Options{DisableWorkflowWorker: true, TaskQueueActivitiesPerSecond: 2, MaxConcurrentActivityExecutionSize: 1})
	plugin.RegisterModelCalls(mw)
	require.NoError(t, mw.Start())
	defer mw.Stop()
	w := worker.New(c, tq, worker.Options{Plugins: []worker.Plugin{plugin}})
	require.NoError(t, w.Start())
	defer w.Stop()

	tc := tollgate.Client{Temporal: c, TaskQueue: tq}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const turns = 6
	for i := 0; i < turns; i++ {
		_, err := tc.Start(ctx, fmt.Sprintf("limited-%d", i), workflows.Input{Prompt: "hi", Model: "counted:m"})
		require.NoError(t, err)
	}
	for i := 0; i < turns; i++ {
		res, err := tc.Result(ctx, fmt.Sprintf("limited-%d", i))
		require.NoError(t, err)
		require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Len(t, m.starts, turns)
	require.Equal(t, map[string]int{queue: turns}, m.queues)
	// When the server handed each call to the model worker: the started
	// events' times. The worker's own clock at the start of each call
	// would add how late a loaded machine ran it, and a first call run
	// late makes the six look closer together than the server let them.
	var dispatched []time.Time
	for i := 0; i < turns; i++ {
		dispatched = append(dispatched, modelCallStarts(ctx, t, c, fmt.Sprintf("limited-%d", i))...)
	}
	require.Len(t, dispatched, turns)
	first, last := dispatched[0], dispatched[0]
	for _, s := range dispatched {
		first, last = minTime(first, s), maxTime(last, s)
	}
	// At 2 per second, 6 calls need about 2.5 s whatever the burst; a
	// slow machine only stretches them.
	require.GreaterOrEqual(t, last.Sub(first), time.Second, "six calls handed out within %v", last.Sub(first))
}

// modelCallStarts returns when the server handed out each of a turn's
// CallModel activities.
func modelCallStarts(ctx context.Context, t *testing.T, c client.Client, id string) []time.Time {
	t.Helper()
	var starts []time.Time
	calls := map[int64]bool{}
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		switch ev.EventType {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			calls[ev.EventId] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activities.CallModelName
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if calls[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] {
				starts = append(starts, ev.GetEventTime().AsTime())
			}
		}
	}
	return starts
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
