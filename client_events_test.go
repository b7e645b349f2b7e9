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
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Client.Events gives a Go program a turn's typed events as it runs:
// the reply's text in pieces, the tool call, its card as it changes, and
// the result last.
func TestClientEventsFollowATurn(t *testing.T) {
	nsrv, err := stream.StartEmbedded(t.TempDir(), 0)
	require.NoError(t, err)
	t.Cleanup(nsrv.Shutdown)
	live, err := stream.Connect(stream.Config{URL: nsrv.URL()})
	require.NoError(t, err)
	t.Cleanup(live.Close)

	srv := temporaltest.NewServer(temporaltest.WithT(t))
	greet := tool.MustFunc(tool.Spec{Name: "greet", Description: "Greet someone."},
		func(_ context.Context, _ tool.Call, a greetArgs) (results.Outcome, error) {
			return results.SucceedText("Hello, " + a.Name + "!"), nil
		})
	p, err := tollgate.NewPlugin(tollgate.Options{
		DataDir: t.TempDir(), Workspace: t.TempDir(),
		Tools: []tool.Tool{greet}, NoBuiltins: true,
		Providers: map[string]tollgate.Provider{"mine": tollgatetest.NewModel(
			tollgatetest.Reply("Greeting Ada now.", tollgatetest.Call("g1", "greet", greetArgs{Name: "Ada"})),
			tollgatetest.Reply("Ada has been greeted."),
		)},
		Events: live,
	})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: srv.GetFrontendHostPort(), Namespace: srv.GetDefaultNamespace(), Plugins: []client.Plugin{p}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	w := worker.New(c, "events", worker.Options{})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = tollgate.Client{Temporal: c}.Events(ctx, "x", 0)
	require.ErrorIs(t, err, stream.ErrUnavailable, "without a source the client says so")

	tg := tollgate.Client{Temporal: c, TaskQueue: "events", Live: live}
	sub, err := tg.Events(ctx, "events-1", 0)
	require.NoError(t, err, "subscribing before the turn exists is fine")
	defer sub.Close()
	_, err = tg.Start(ctx, "events-1", workflows.Input{Prompt: "greet Ada", Model: "mine:any", Tools: []string{"greet"}})
	require.NoError(t, err)

	texts := map[int]*strings.Builder{}
	var calls, cards []string
	var last stream.Event
	for ev := range sub.Events() {
		require.Equal(t, "events-1", ev.Turn)
		require.Greater(t, ev.ID, last.ID)
		last = ev
		switch ev.Type {
		case stream.TypeText:
			if texts[ev.Step] == nil {
				texts[ev.Step] = &strings.Builder{}
			}
			texts[ev.Step].WriteString(ev.Text)
		case stream.TypeToolCall:
			if ev.ToolCallID != "" {
				calls = append(calls, ev.ToolCallID+" "+ev.ToolName)
			}
		case stream.TypeCard:
			cards = append(cards, ev.Card.CallID+" "+string(ev.Card.State))
		}
		if ev.Type == stream.TypeResult {
			break
		}
	}
	require.NoError(t, sub.Err())
	require.Equal(t, stream.TypeResult, last.Type)
	require.Equal(t, "completed", last.Status)
	require.Equal(t, "Greeting Ada now.", texts[1].String())
	require.Equal(t, "Ada has been greeted.", texts[2].String())
	require.Equal(t, []string{"g1 greet"}, calls)
	require.Contains(t, cards, "g1 succeeded")

	res, err := tg.Result(ctx, "events-1")
	require.NoError(t, err)
	require.Equal(t, "Ada has been greeted.", res.Text)
	var lag *stream.LaggedError
	require.False(t, errors.As(sub.Err(), &lag))
}
