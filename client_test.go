package tollgate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

type greetArgs struct {
	Name string `json:"name"`
}

// The whole public path on a real server: the plugin on the client
// enables Tollgate on a worker made from it, and Client starts, reads and
// answers a turn that uses a tool and a model provider of the user's own.
func TestPluginAndClientOnARealServer(t *testing.T) {
	tg := greeter(t, tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("g1", "greet", greetArgs{Name: "Ada"})),
		tollgatetest.Reply("Greeted."),
	))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := tg.Start(ctx, "greet-1", workflows.Input{Prompt: "greet Ada", Model: "mine:any", Tools: []string{"greet"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := tg.State(ctx, "greet-1")
		return err == nil && s.Status == workflows.StatusWaiting
	}, 30*time.Second, 50*time.Millisecond)

	_, err = tg.Respond(ctx, "greet-1", workflows.Response{CallID: "nope", Decision: results.DecisionApprove})
	var rejected *tollgate.RejectedError
	require.True(t, errors.As(err, &rejected), "%v", err)
	require.Contains(t, rejected.Reason, `there is no call "nope"`)
	require.Equal(t, workflows.ErrTypeUnknownCall, rejected.Type)

	card, err := tg.Respond(ctx, "greet-1", workflows.Response{CallID: "g1", Decision: results.DecisionApprove, By: "ann"})
	require.NoError(t, err)
	require.Equal(t, "g1", card.CallID)
	res, err := tg.Result(ctx, "greet-1")
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, "Greeted.", res.Text)

	_, err = tg.Respond(ctx, "greet-1", workflows.Response{CallID: "g1", Decision: results.DecisionApprove, By: "late"})
	require.True(t, errors.As(err, &rejected), "%v", err)
	require.Equal(t, workflows.ErrTypeNotWaiting, rejected.Type, "a turn that has ended waits for nothing")
}

// greeter is a real server with a worker whose model is m ("mine:any")
// and whose one tool, greet, asks for approval; it returns a Client for
// its task queue.
func greeter(t *testing.T, m *tollgatetest.Model) tollgate.Client {
	t.Helper()
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	greet := tool.MustFunc(tool.Spec{Name: "greet", Description: "Greet someone.", Approval: tool.ApprovalAlways, Idempotent: true},
		func(_ context.Context, _ tool.Call, a greetArgs) (results.Outcome, error) {
			return results.SucceedText("Hello, " + a.Name + "!"), nil
		})
	p, err := tollgate.NewPlugin(tollgate.Options{
		DataDir: t.TempDir(), Workspace: t.TempDir(),
		Tools: []tool.Tool{greet}, NoBuiltins: true,
		Providers: map[string]tollgate.Provider{"mine": m},
	})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: srv.GetFrontendHostPort(), Namespace: srv.GetDefaultNamespace(), Plugins: []client.Plugin{p}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	w := worker.New(c, "greeter", worker.Options{})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	return tollgate.Client{Temporal: c, TaskQueue: "greeter"}
}

// The options the gateway and the starter start, read and answer turns
// with, on a real server: one id taken twice (a running turn, then a
// closed one), a caller's Update id, and pinned runs.
func TestClientOptionsOnARealServer(t *testing.T) {
	tg := greeter(t, tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("g1", "greet", greetArgs{Name: "Ada"}), tollgatetest.Call("g2", "greet", greetArgs{Name: "Bob"})),
		tollgatetest.Reply("Greeted."),
	))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := workflows.Input{Prompt: "greet Ada and Bob", Model: "mine:any", Tools: []string{"greet"}}
	waiting := func(id string, calls int) {
		t.Helper()
		require.Eventually(t, func() bool {
			s, err := tg.State(ctx, id)
			return err == nil && len(waitingCalls(s)) == calls
		}, 30*time.Second, 50*time.Millisecond, "turn %s never had %d waiting calls", id, calls)
	}
	approve := func(call, by string) workflows.Response {
		return workflows.Response{CallID: call, Decision: results.DecisionApprove, By: by}
	}

	first, err := tg.StartWithOptions(ctx, tollgate.StartOptions{ID: "opts"}, in)
	require.NoError(t, err)
	again, err := tg.Start(ctx, "opts", in)
	require.NoError(t, err, "without ErrorWhenAlreadyStarted the SDK hands back the running turn")
	require.Equal(t, first.GetRunID(), again.GetRunID())
	_, err = tg.StartWithOptions(ctx, tollgate.StartOptions{ID: "opts", ErrorWhenAlreadyStarted: true}, in)
	var taken *serviceerror.WorkflowExecutionAlreadyStarted
	require.ErrorAs(t, err, &taken)
	waiting("opts", 2)

	// One Update id, one outcome: a different response sent under it
	// gets the first one's card, not a refusal of a call that no longer
	// waits; the same response under its own id is refused.
	card, err := tg.RespondWithOptions(ctx, tollgate.RespondOptions{TurnID: "opts", UpdateID: "key-1"}, approve("g1", "ann"))
	require.NoError(t, err)
	deny := workflows.Response{CallID: "g1", Decision: results.DecisionDeny, By: "bob"}
	dup, err := tg.RespondWithOptions(ctx, tollgate.RespondOptions{TurnID: "opts", UpdateID: "key-1"}, deny)
	require.NoError(t, err)
	require.Equal(t, card, dup)
	_, err = tg.Respond(ctx, "opts", deny)
	var rejected *tollgate.RejectedError
	require.ErrorAs(t, err, &rejected)
	require.Equal(t, workflows.ErrTypeNotWaiting, rejected.Type)

	_, err = tg.Respond(ctx, "opts", approve("g2", "ann"))
	require.NoError(t, err)
	_, err = tg.Result(ctx, "opts")
	require.NoError(t, err)
	second, err := tg.Start(ctx, "opts", in)
	require.NoError(t, err, "a closed turn's id starts another under the default reuse policy")
	require.NotEqual(t, first.GetRunID(), second.GetRunID())
	waiting("opts", 2)

	// Pinned to the first run, each call reads or answers that run, not
	// the one that took its id.
	old := tollgate.StateOptions{TurnID: "opts", RunID: first.GetRunID()}
	s, err := tg.StateWithOptions(ctx, old)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, s.Status)
	_, err = tg.RespondWithOptions(ctx, tollgate.RespondOptions{TurnID: "opts", RunID: first.GetRunID()}, approve("g1", "carl"))
	require.ErrorAs(t, err, &rejected)
	require.Equal(t, workflows.ErrTypeNotWaiting, rejected.Type)
	err = tg.SignalWithOptions(ctx, tollgate.SignalOptions{TurnID: "opts", RunID: first.GetRunID()}, approve("g1", "carl"))
	var nf *serviceerror.NotFound
	require.ErrorAs(t, err, &nf)
	waiting("opts", 2)

	require.NoError(t, tg.SignalWithOptions(ctx, tollgate.SignalOptions{TurnID: "opts", RunID: second.GetRunID()}, approve("g1", "dora")))
	waiting("opts", 1)
	_, err = tg.RespondWithOptions(ctx, tollgate.RespondOptions{TurnID: "opts", RunID: second.GetRunID()}, approve("g2", "dora"))
	require.NoError(t, err)
	res, err := tg.Result(ctx, "opts")
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, res.Status)

	_, err = tg.StartWithOptions(ctx, tollgate.StartOptions{ID: "opts", IDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, ErrorWhenAlreadyStarted: true}, in)
	require.ErrorAs(t, err, &taken, "a closed turn's id is refused under reject-duplicate")
}

func waitingCalls(s workflows.State) []string {
	var out []string
	for _, c := range s.Cards {
		if c.State.Waiting() {
			out = append(out, c.CallID)
		}
	}
	return out
}

func TestResponseIDNamesTheResponse(t *testing.T) {
	a := workflows.Response{CallID: "c1", Decision: results.DecisionApprove, By: "ada"}
	require.Equal(t, tollgate.ResponseID(a), tollgate.ResponseID(a), "a resent response reuses its id")
	require.True(t, strings.HasPrefix(tollgate.ResponseID(a), "respond-c1-approve-"))
	b := a
	b.By = "bob"
	require.NotEqual(t, tollgate.ResponseID(a), tollgate.ResponseID(b))
}

// A client plugin gives clients and replayers the payload storage and
// replayers the workflow, and runs nothing: a worker made from its client
// registers nothing of Tollgate's.
func TestClientPluginReplaysAndRunsNothing(t *testing.T) {
	p, err := tollgate.NewClientPlugin(t.TempDir())
	require.NoError(t, err)
	require.Empty(t, p.Workspace())
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Plugins: []worker.Plugin{p}})
	require.NoError(t, err)
	// One replayer, several histories: the plugin registers once.
	for _, f := range []string{"approval_approved.json", "approval_denied.json", "transfer.json"} {
		require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, "workflows/testdata/histories/"+f), f)
	}
}

// The validator's error reaches a client as an ApplicationError whose
// message is the sentence; workers from before the kinds existed type it
// with their Go error's name, a refusal of the response all the same.
func TestAsRejectionSortsRefusals(t *testing.T) {
	rej, ok := tollgate.AsRejection(temporal.NewApplicationError("call c1 is running, not waiting for a response", "*errors.errorString"), "T")
	require.True(t, ok)
	require.Equal(t, "call c1 is running, not waiting for a response", rej.Reason)
	require.Equal(t, workflows.ErrTypeInvalidResponse, rej.Type)

	rej, ok = tollgate.AsRejection(fmt.Errorf("update: %w", serviceerror.NewNotFound("workflow execution already completed")), "T")
	require.True(t, ok)
	require.Equal(t, "the turn T has ended; it takes no more responses", rej.Reason)
	require.Equal(t, workflows.ErrTypeNotWaiting, rej.Type)

	_, ok = tollgate.AsRejection(serviceerror.NewNotFound("workflow not found for ID: T"), "T")
	require.False(t, ok, "a turn that is not there refused nothing")
}
