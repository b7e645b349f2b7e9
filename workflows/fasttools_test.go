package workflows

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/transcript"
	"github.com/tollgate-dev/tollgate/tool"
)

// ran is one start of a tool's activity, local or not, as the test
// environment saw it.
type ran struct {
	local bool
	queue string
	call  string
}

func (r ran) String() string {
	kind := "activity"
	if r.local {
		kind = "local"
	}
	if r.queue != "" {
		return fmt.Sprintf("%s %s@%s", kind, r.call, r.queue)
	}
	return kind + " " + r.call
}

// fastHarness is the harness of a worker whose features are f and whose
// own workspace queue is own: what tollgate.PinWorkspace and register set
// up in a real worker.
type fastHarness struct {
	*harness
	mu   sync.Mutex
	runs []ran
}

func newFastHarness(t *testing.T, f Features, own string, replies ...results.Message) *fastHarness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	// The start time stays now: local activities measure their deadlines
	// against the wall clock from the workflow's time.
	env := suite.NewTestWorkflowEnvironment()
	h := &fastHarness{harness: &harness{env: env, model: &fakeModel{replies: replies}, log: &toolLog{}, connected: &sync.Map{}}}
	reg, err := tool.NewRegistry(append(testTools(t, h.log, h.connected), fastTools(h.log)...)...)
	require.NoError(t, err)
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	acts := &activities.Activities{Tools: reg, Models: h.model, Transcripts: store, Workspace: t.TempDir()}
	env.RegisterWorkflowWithOptions(f.AgentTurn, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivity(acts)
	env.RegisterActivityWithOptions(activities.RunLocalTool(acts, own), activity.RegisterOptions{Name: activities.RunLocalToolName})
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		if info.ActivityType.Name != activities.RunLocalToolName {
			return
		}
		in := args[0].(activities.LocalToolInput)
		h.add(ran{local: true, queue: in.Queue, call: in.CallID})
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != activities.RunToolName {
			return
		}
		var in activities.RunToolInput
		require.NoError(t, args.Get(&in))
		queue := info.TaskQueue
		if queue == "default-test-taskqueue" {
			queue = ""
		}
		h.add(ran{queue: queue, call: in.CallID})
	})
	return h
}

func (h *fastHarness) add(r ran) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs = append(h.runs, r)
}

func (h *fastHarness) started() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.runs))
	for i, r := range h.runs {
		out[i] = r.String()
	}
	return out
}

// fastTools are workspace tools with the local flag in each combination
// the workflow branches on.
func fastTools(log *toolLog) []tool.Tool {
	peek := func(name string, spec tool.Spec) tool.Tool {
		spec.Name, spec.Description, spec.Workspace = name, "Look at the workspace.", true
		var mu sync.Mutex
		attempts := map[string]int{}
		return tool.MustFunc(spec, func(_ context.Context, call tool.Call, a textArgs) (results.Outcome, error) {
			mu.Lock()
			attempts[call.CallID]++
			n := attempts[call.CallID]
			mu.Unlock()
			log.add(fmt.Sprintf("%s:%s", name, a.Text))
			if a.Text == "flaky" && n == 1 {
				return results.Outcome{}, tool.Retryable(fmt.Errorf("disk busy"))
			}
			return results.SucceedText(fmt.Sprintf("saw %s (attempt %d)", a.Text, n)), nil
		})
	}
	return []tool.Tool{
		peek("peek", tool.Spec{Local: true, Idempotent: true, Concurrent: true}),
		peek("peek_gated", tool.Spec{Local: true, Idempotent: true, Approval: tool.ApprovalAlways}),
		// Says local, but is not idempotent: it must never run locally.
		peek("poke", tool.Spec{Local: true}),
		// Reaches no workspace: local, and never pinned.
		tool.MustFunc(tool.Spec{Name: "clock", Description: "Tell the time.", Local: true, Idempotent: true, Concurrent: true},
			func(context.Context, tool.Call, struct{}) (results.Outcome, error) {
				log.add("clock")
				return results.SucceedText("noon"), nil
			}),
	}
}

// Local tools run as local activities in the workflow task of the reply
// that made the calls, with the activity's typed results; a tool that
// says local but is not idempotent runs as an activity; a local tool
// that fails transiently is retried, as its activity would be.
func TestLocalToolsRunAsLocalActivities(t *testing.T) {
	h := newFastHarness(t, Features{}, "",
		calls("", tc("a", "peek", `{"text":"one"}`), tc("b", "poke", `{"text":"two"}`), tc("c", "peek", `{"text":"flaky"}`), tc("d", "echo", `{"text":"four"}`)),
		results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "look", Tools: []string{"peek", "poke", "echo"}})

	require.Equal(t, StatusCompleted, res.Status)
	require.ElementsMatch(t, []string{"local a", "activity b", "local c", "local c", "activity d"}, h.started())
	require.Equal(t, []string{
		"a error=false saw one (attempt 1)",
		"b error=false saw two (attempt 1)",
		"c error=false saw flaky (attempt 2)",
		"d error=false four",
	}, toolTexts(h.model.last()))
	for _, c := range res.Cards {
		require.Equal(t, results.StateSucceeded, c.State, c.CallID)
	}
}

// Arguments that do not fit the schema fail before anything runs, local
// or not, exactly as for an activity tool.
func TestLocalToolArgumentsAreValidatedFirst(t *testing.T) {
	h := newFastHarness(t, Features{}, "",
		calls("", tc("a", "peek", `{"text":3}`)),
		results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "look", Tools: []string{"peek"}})

	require.Empty(t, h.started())
	c := res.Cards[0]
	require.Equal(t, results.StateFailed, c.State)
	require.Equal(t, results.FailureToolError, c.Failure.Reason)
	require.Contains(t, c.Failure.Message, "invalid arguments for peek")
}

// A local tool that needs approval waits like any other, then runs
// locally once approved.
func TestLocalToolWaitsForApprovalThenRunsLocally(t *testing.T) {
	h := newFastHarness(t, Features{}, "",
		calls("", tc("g", "peek_gated", `{"text":"secret"}`)),
		results.AssistantText("done"))
	var before State
	var before2 []string
	h.env.RegisterDelayedCallback(func() { before, before2 = h.state(t), h.started() }, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "g", Decision: results.DecisionApprove, By: "alice"}, nil)
	res := h.run(t, Input{Prompt: "look", Tools: []string{"peek_gated"}})

	require.Equal(t, results.StatePendingApproval, before.Cards[0].State)
	require.Empty(t, before2, "nothing runs before the approval")
	require.Equal(t, []string{"local g"}, h.started())
	require.Equal(t, results.StateSucceeded, res.Cards[0].State)
	require.Equal(t, "alice", res.Cards[0].Decisions[0].By)
}

// With a pinned workspace, workspace tools' calls go to the pinned queue;
// local ones run locally on the pinned worker itself; other tools run on
// the turn's queue.
func TestPinnedWorkspaceToolsRunOnTheWorkspaceWorker(t *testing.T) {
	const own = "tq/ws/a"
	h := newFastHarness(t, Features{WorkspaceQueue: own}, own,
		calls("", tc("a", "peek", `{"text":"one"}`), tc("b", "poke", `{"text":"two"}`), tc("c", "clock", `{}`), tc("d", "echo", `{"text":"x"}`)),
		results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "look", Tools: []string{"peek", "poke", "clock", "echo"}})

	require.Equal(t, StatusCompleted, res.Status)
	require.ElementsMatch(t, []string{"local a@tq/ws/a", "activity b@tq/ws/a", "local c", "activity d"}, h.started())
}

// A local call whose workflow task runs on a worker that does not hold
// the pinned workspace does not run there: it goes to the workspace
// worker's queue as an activity.
func TestLocalToolOnAnotherWorkerGoesToTheWorkspaceQueue(t *testing.T) {
	h := newFastHarness(t, Features{WorkspaceQueue: "tq/ws/a"}, "tq/ws/b",
		calls("", tc("a", "peek", `{"text":"one"}`), tc("c", "clock", `{}`)),
		results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "look", Tools: []string{"peek", "clock"}})

	require.Equal(t, StatusCompleted, res.Status)
	require.ElementsMatch(t, []string{"local a@tq/ws/a", "activity a@tq/ws/a", "local c"}, h.started())
	require.ElementsMatch(t, []string{"peek:one", "clock"}, h.log.all(), "the bounced local run never ran the tool")
}

// A pinned call no worker takes before policy.workspace_timeout fails
// with a tool error the model can act on and that names no queue; the
// turn re-pins, recording the new queue, and its next call runs.
func TestPinnedCallWithNoWorkerFailsClearlyAndTheTurnRepins(t *testing.T) {
	const own = "tq/ws/a"
	h := newFastHarness(t, Features{WorkspaceQueue: own}, own,
		calls("", tc("a", "poke", `{"text":"one"}`)),
		calls("", tc("b", "poke", `{"text":"two"}`)),
		results.AssistantText("done"))
	first := true
	h.env.OnActivity(activities.RunToolName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunToolInput) (results.Outcome, error) {
			if first {
				first = false
				// What the server reports when nobody polls the queue.
				// (The SDK encodes the result even beside an error.)
				return results.FailInternal("unused", "unused"), temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			}
			return results.SucceedText("ran " + in.CallID), nil
		})
	res := h.run(t, Input{Prompt: "look", Tools: []string{"poke"}, Policy: Policy{WorkspaceTimeout: Duration(90 * time.Second)}})

	require.Equal(t, StatusCompleted, res.Status)
	a := res.Cards[0]
	require.Equal(t, results.StateFailed, a.State)
	require.Equal(t, results.FailureToolError, a.Failure.Reason)
	require.Equal(t, workspaceUnavailable(90*time.Second), a.Failure.Message)
	require.Contains(t, a.Failure.Message, "the workspace's worker is unavailable")
	require.Contains(t, a.Failure.Message, "1m30s")
	require.NotContains(t, a.Failure.Message, own)
	require.Equal(t, results.StateSucceeded, res.Cards[1].State)
	require.Equal(t, []string{
		"a error=true " + `{"error":"` + workspaceUnavailable(90*time.Second) + `"}`,
	}, toolTexts(h.model.requests[1].Messages))
}

// A shared workspace (no WorkspaceQueue) pins nothing: every call runs on
// the turn's queue, local ones locally.
func TestSharedWorkspacePinsNothing(t *testing.T) {
	h := newFastHarness(t, Features{}, "tq/ws/b",
		calls("", tc("a", "peek", `{"text":"one"}`), tc("b", "poke", `{"text":"two"}`)),
		results.AssistantText("done"))
	h.run(t, Input{Prompt: "look", Tools: []string{"peek", "poke"}})
	require.ElementsMatch(t, []string{"local a", "activity b"}, h.started())
}

func TestWorkspaceTimeoutMustBePositive(t *testing.T) {
	err := ValidateInput(Input{Prompt: "x", Model: "m", Policy: Policy{WorkspaceTimeout: Duration(-time.Second)}})
	require.ErrorContains(t, err, "policy.workspace_timeout")
}

// Input.Workspace continues a conversation in the workspace its turn
// before ended in, and the result says where this one ended. A queue
// that is not a workspace queue of the turn's own task queue is not
// taken (the caller names it), and where workers share one workspace
// nothing is pinned at all.
func TestInputWorkspaceContinuesInTheWorkspaceBefore(t *testing.T) {
	const (
		own  = "default-test-taskqueue/ws/a"
		prev = "default-test-taskqueue/ws/b"
	)
	for name, c := range map[string]struct {
		features  Features
		workspace string
		want      string
	}{
		"continued":        {Features{WorkspaceQueue: own}, prev, prev},
		"foreign queue":    {Features{WorkspaceQueue: own}, "other-app/ws/b", own},
		"bare prefix":      {Features{WorkspaceQueue: own}, "default-test-taskqueue/ws/", own},
		"not a workspace":  {Features{WorkspaceQueue: own}, "default-test-taskqueue", own},
		"shared workspace": {Features{}, prev, ""},
	} {
		t.Run(name, func(t *testing.T) {
			h := newFastHarness(t, c.features, own,
				calls("", tc("a", "poke", `{"text":"one"}`)),
				results.AssistantText("done"))
			res := h.run(t, Input{Prompt: "look", Tools: []string{"poke"}, Workspace: c.workspace})
			require.Equal(t, StatusCompleted, res.Status)
			want := "activity a"
			if c.want != "" {
				want += "@" + c.want
			}
			require.Equal(t, []string{want}, h.started())
			require.Equal(t, c.want, res.Workspace)
		})
	}
}
