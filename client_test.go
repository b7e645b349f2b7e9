package tollgate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
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
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	greet := tool.MustFunc(tool.Spec{Name: "greet", Description: "Greet someone.", Approval: tool.ApprovalAlways, Idempotent: true},
		func(_ context.Context, _ tool.Call, a greetArgs) (results.Outcome, error) {
			return results.SucceedText("Hello, " + a.Name + "!"), nil
		})
	m := tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("g1", "greet", greetArgs{Name: "Ada"})),
		tollgatetest.Reply("Greeted."),
	)
	p, err := tollgate.NewPlugin(tollgate.Options{
		DataDir: t.TempDir(), Workspace: t.TempDir(),
		Tools: []tool.Tool{greet}, NoBuiltins: true,
		Providers: map[string]tollgate.Provider{"mine": m},
	})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: srv.GetFrontendHostPort(), Namespace: srv.GetDefaultNamespace(), Plugins: []client.Plugin{p}})
	require.NoError(t, err)
	defer c.Close()
	w := worker.New(c, "greeter", worker.Options{})
	require.NoError(t, w.Start())
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tg := tollgate.Client{Temporal: c, TaskQueue: "greeter"}
	_, err = tg.Start(ctx, "greet-1", workflows.Input{Prompt: "greet Ada", Model: "mine:any", Tools: []string{"greet"}})
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
