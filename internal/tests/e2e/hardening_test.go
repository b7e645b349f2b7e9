package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/storage/payloadstore"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// A turn flooded with Signals while a tool runs cannot continue as new
// (the tool's activity would be lost with the run), so its history guard
// ends it before the server would terminate it: the running call is
// stopped and reported with an unknown outcome, and every dropped Signal
// is counted. (A parked turn continues as new instead: longturn_test.go.)
func TestHistoryGuardEndsATurnFloodedWithSignals(t *testing.T) {
	t.Parallel()
	g := newGate(t, "hold", false, true)
	e := newEnv(t, "history_guard_running", g)
	model := e.script(reply("", call("h1", "hold", map[string]string{"job": "x"})))
	e.startWorker()
	policy := workflows.Policy{MaxHistoryEvents: 120}
	run := e.start(workflows.Input{Prompt: "Hold", Model: model, Tools: []string{"hold"}, Policy: policy})
	g.waitStarted(t, 1)

	garbage := converter.NewRawValue(&commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingProto), converter.MetadataMessageType: []byte("temporal.api.common.v1.Payloads")},
		Data:     []byte{0xff, 0x01, 0x02},
	})
	ctx := context.Background()
	sent := 0
	for i := 0; i < 150; i++ {
		var payload any = workflows.Response{CallID: "nope", Decision: results.DecisionApprove}
		if i%2 == 1 {
			payload = garbage
		}
		if err := e.caller.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.RespondName, payload); err != nil {
			// The turn ended itself while the flood went on.
			break
		}
		sent++
	}

	res := e.result(run)
	require.Equal(t, workflows.StatusFailed, res.Status)
	require.Contains(t, res.Error, "the turn's history reached")
	require.Contains(t, res.Error, "limits 120")
	c := mustCard(t, res.Cards, "h1")
	require.Equal(t, results.StateFailed, c.State)
	require.Equal(t, "the turn was ended because its history grew too large while this tool ran; it was stopped and its outcome is unknown", c.Failure.Message)
	require.Len(t, toolTexts(res.Messages), 1, "every call is answered")
	require.Equal(t, sent, res.InvalidSignals, "every dropped Signal is counted")
	e.record(run)
}

// A handoff ends the turn at once although another call of its step
// waits for approval; an approval sent afterwards finds the turn ended.
func TestTransferRefusesACallStillWaiting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "transfer_refuses_waiting")
	model := e.script(reply("Handing you to billing.",
		call("w1", "write_file", map[string]string{"path": "a.md", "content": "x"}),
		call("h1", "handoff", map[string]string{"target": "billing", "message": "wants a refund"}),
	))
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Refund please", Model: model, Tools: []string{"write_file", "handoff"}})
	res := e.result(run)

	require.Equal(t, workflows.StatusTransferred, res.Status)
	require.Equal(t, "billing", res.Transfer.Target)
	c := mustCard(t, res.Cards, "w1")
	require.Equal(t, results.StateRefused, c.State)
	require.Equal(t, "the conversation was transferred to billing while this call waited", c.Reason)
	require.Len(t, toolTexts(res.Messages), 2)

	_, err := respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "late"})
	require.Error(t, err)
	require.NoFileExists(t, e.ws+"/a.md")
	e.record(run)
}

// Calls beyond policy.max_calls_per_step fail with a tool error the model
// reads; the others run.
func TestCallsBeyondTheCapFail(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "calls_per_step_capped")
	dir := map[string]string{"path": "."}
	model := e.script(
		reply("", call("l1", "list_dir", dir), call("l2", "list_dir", dir), call("l3", "list_dir", dir), call("l4", "list_dir", dir)),
		expecting(reply("Listed twice."), 4, "policy.max_calls_per_step"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "List", Model: model, Tools: []string{"list_dir"}, Policy: workflows.Policy{MaxCallsPerStep: 2}})
	res := e.result(run)

	require.Equal(t, workflows.StatusCompleted, res.Status)
	for _, id := range []string{"l1", "l2"} {
		require.Equal(t, results.StateSucceeded, mustCard(t, res.Cards, id).State, id)
	}
	for _, id := range []string{"l3", "l4"} {
		c := mustCard(t, res.Cards, id)
		require.Equal(t, results.StateFailed, c.State, id)
		require.Contains(t, c.Failure.Message, "a step runs at most 2")
	}
	e.record(run)
}

// A call waiting behind a non-concurrent one of its step shows as queued,
// not as running.
func TestQueuedCallShowsAsQueued(t *testing.T) {
	t.Parallel()
	g := newGate(t, "job", true, true)
	g.spec.Concurrent = false
	e := newEnv(t, "queued_behind_exclusive", g)
	model := e.script(
		reply("", call("j1", "job", map[string]string{"job": "a"}), call("j2", "job", map[string]string{"job": "b"})),
		expecting(reply("Both done."), 2, ""),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Run both", Model: model, Tools: []string{"job"}})
	g.waitStarted(t, 1)

	s := e.waitState(run, "j2 queued", func(s workflows.State) bool {
		c, ok := card(s.Cards, "j2")
		return ok && c.Queued
	})
	j1, j2 := mustCard(t, s.Cards, "j1"), mustCard(t, s.Cards, "j2")
	require.Equal(t, results.StateRunning, j1.State)
	require.False(t, j1.Queued)
	require.Equal(t, results.StateRunning, j2.State)

	g.open()
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.False(t, mustCard(t, res.Cards, "j2").Queued)
}

// A turn cancelled while an approved call's activity waits for a worker
// to pick it up says the tool never started, rather than that its outcome
// is unknown.
func TestCancelBeforeTheToolStartedIsARefusal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "cancel_before_start")
	e.taskTimeout = stoppedWorkerTaskTimeout
	model := e.script(reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "x"})))
	first := e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write a.md", Model: model, Tools: []string{"write_file"}})
	e.waitCard(run, "w1", results.StatePendingApproval)
	e.stopWorker(first)
	// This worker runs the workflow but no activities: the approved
	// call's RunTool is scheduled and nobody starts it.
	e.startWorkerWith(worker.Options{LocalActivityWorkerOnly: true})
	_, err := respondReliably(e.caller, run, "approve-w1", workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice"})
	require.NoError(t, err)

	require.NoError(t, e.caller.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
	res := e.result(run)
	require.Equal(t, workflows.StatusCancelled, res.Status)
	c := mustCard(t, res.Cards, "w1")
	require.Equal(t, results.StateRefused, c.State)
	require.Equal(t, "the turn was cancelled before this tool started", c.Reason)
	require.NoFileExists(t, e.ws+"/a.md")
	e.record(run)
}

// A tool's whole output, too large for the card, is kept in the output
// store; the card names it and starter raw (here: the store) reads it
// back whole.
func TestLargeRawOutputIsKeptAndRetrievable(t *testing.T) {
	t.Parallel()
	whole := strings.Repeat("0123456789abcdef\n", 20000)
	big := tool.MustFunc(tool.Spec{Name: "dump", Description: "Prints a lot.", Idempotent: true, Concurrent: true},
		func(context.Context, tool.Call, struct{}) (results.Outcome, error) {
			return results.SucceedText(whole), nil
		})
	e := newEnv(t, "raw_output_stored", big)
	model := e.script(reply("", call("d1", "dump", map[string]string{})), expecting(reply("Dumped."), 1, "[truncated]"))
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Dump", Model: model, Tools: []string{"dump"}})
	res := e.result(run)

	c := mustCard(t, res.Cards, "d1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.True(t, c.Output.Truncated)
	require.Empty(t, c.Output.Raw)
	require.True(t, strings.HasPrefix(c.Output.RawRef, "sha256:"), c.Output.RawRef)
	store, err := payloadstore.New(datadir.Payloads(e.data))
	require.NoError(t, err)
	got, err := store.GetRaw(c.Output.RawRef)
	require.NoError(t, err)
	require.Equal(t, whole, got)
}
