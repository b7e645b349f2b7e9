package refunds_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/examples/refunds"
	"github.com/tollgate-dev/tollgate/replay"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/workflows"
)

const histories = "testdata/histories"

var record = flag.Bool("record", false, "re-record "+histories+" from runs on a real Temporal server")

// Every recorded turn still replays against this build's AgentTurn: a
// change to Tollgate (or to how this agent drives it) that would break
// turns already parked in production fails here first.
func TestRecordedHistoriesReplay(t *testing.T) {
	// The recorder keeps every payload inline, so the replayer needs no
	// payload store; histories exported from production need the
	// worker's data directory instead of an empty one.
	got := tollgatetest.Replay(context.Background(), t.TempDir(), histories)
	require.NotEmpty(t, got)
	for _, r := range got {
		require.NoError(t, r.Err, r.File)
		require.Positive(t, r.Events, r.File)
	}
}

// TestRecordRefundApproved records refund_approved.json on an in-process
// Temporal server, through the same public path as cmd/worker and
// cmd/start: the turn waits for ann's shop connection, looks the order
// up, waits for her approval and refunds once.
//
//	go test -run TestRecordRefundApproved -record .
func TestRecordRefundApproved(t *testing.T) {
	if !*record {
		t.Skip("re-record with -record")
	}
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	shop := refunds.NewDemoShop()
	conns := connections.NewMemoryStore()
	m := tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("l1", "lookup_order", map[string]string{"order_id": "1001"})),
		tollgatetest.Reply("The kettle was delivered; refunding it.", tollgatetest.Call("r1", "issue_refund", refundKettle)),
		tollgatetest.Reply("Refunded 49.99 EUR; it reaches your card in 3 to 5 days."),
	)
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		DataDir: t.TempDir(), Workspace: t.TempDir(),
		Tools: refunds.Tools(shop, conns), NoBuiltins: true, Connections: conns,
		Providers: map[string]tollgate.Provider{"recorded": m},
	})
	require.NoError(t, err)
	c, err := client.Dial(client.Options{
		HostPort: srv.GetFrontendHostPort(), Namespace: srv.GetDefaultNamespace(),
		// A fixed identity keeps this machine's name out of the history.
		Identity: "refunds-recorder",
		Plugins:  []client.Plugin{plugin},
	})
	require.NoError(t, err)
	defer c.Close()
	w := worker.New(c, refunds.TaskQueue, worker.Options{})
	require.NoError(t, w.Start())
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tg := tollgate.Client{Temporal: c, TaskQueue: refunds.TaskQueue}
	in := refunds.NewInput("ann", "Order 1001 arrived broken; please refund it.")
	in.Model = "recorded:support"
	run, err := tg.Start(ctx, "refund-approved", in)
	require.NoError(t, err)

	waitFor(t, tg, "l1", results.StateWaitingConnection)
	require.NoError(t, conns.Put(ctx, connections.Credential{Provider: refunds.ShopProvider, User: "ann", Token: "shp_ann"}))
	_, err = tg.Respond(ctx, "refund-approved", workflows.Response{CallID: "l1", Decision: results.DecisionConnected, By: "ann"})
	require.NoError(t, err)

	waitFor(t, tg, "r1", results.StatePendingApproval)
	require.Empty(t, shop.Refunds())
	_, err = tg.Respond(ctx, "refund-approved", workflows.Response{CallID: "r1", Decision: results.DecisionApprove, By: "ann"})
	require.NoError(t, err)

	res, err := tg.Result(ctx, "refund-approved")
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Len(t, shop.Refunds(), 1)

	writeHistory(t, c, run, filepath.Join(histories, "refund_approved.json"))
}

// waitFor polls the turn until call id's card is in state.
func waitFor(t *testing.T, tg tollgate.Client, id string, state results.State) {
	t.Helper()
	require.Eventually(t, func() bool {
		s, err := tg.State(context.Background(), "refund-approved")
		if err != nil {
			return false
		}
		for _, c := range s.Cards {
			if c.CallID == id {
				return c.State == state
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "call %s never reached %s", id, state)
}

// writeHistory writes the run's history as `temporal workflow show
// --output json` does, the format tollgatetest.Replay reads.
func writeHistory(t *testing.T, c client.Client, run client.WorkflowRun, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var buf bytes.Buffer
	require.NoError(t, replay.Export(ctx, c, run.GetID(), run.GetRunID(), &buf))
	out := buf.Bytes()
	// A payload stored outside history would need this run's data
	// directory to replay; the committed history must stand alone.
	require.NotContains(t, string(out), "externalPayloads")
	// The SDK names sticky task queues <host>:<uuid>; replay ignores them,
	// so keep the recording machine's name out of the repository.
	if host, err := os.Hostname(); err == nil && host != "" {
		out = bytes.ReplaceAll(out, []byte(`"name": "`+host+`:`), []byte(`"name": "recorder:`))
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, out, 0o644))
}
