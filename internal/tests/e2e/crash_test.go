package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate/internal/devserver"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// stoppedWorkerTaskTimeout bounds how long a turn waits for a workflow task
// that a stopping worker's in-flight poll took with it.
const stoppedWorkerTaskTimeout = 2 * time.Second

// crashTurn starts a turn whose only call is the gate tool, waits until
// the tool runs on a first worker, stops that worker and starts a second.
func crashTurn(t *testing.T, name string, g *gate, outcomeUnknown bool) (*env, client.WorkflowRun, workflows.Result) {
	e := newEnv(t, name, g)
	e.taskTimeout = stoppedWorkerTaskTimeout
	last := expecting(reply("Done."), 1, "finished on run 2")
	if outcomeUnknown {
		last = expecting(reply("I can't tell whether the job ran."), 1, results.OutcomeUnknownMessage)
	}
	model := e.script(reply("Running the job.", call("j1", g.spec.Name, map[string]string{"job": "deploy"})), last)
	first := e.startWorker()
	run := e.start(workflows.Input{Prompt: "Run the job", Model: model, Tools: []string{g.spec.Name}})
	g.waitStarted(t, 1)

	e.stopWorker(first)
	e.startWorker()
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	return e, run, res
}

// The worker is lost while an idempotent tool runs (the tool ignores the
// cancellation, like a hung host): the heartbeat timeout ends the attempt
// and another worker retries it to completion.
func TestCrashIdempotentToolIsRetriedOnAnotherWorker(t *testing.T) {
	t.Parallel()
	g := newGate(t, "job", true, false)
	e, run, res := crashTurn(t, "crash_idempotent_retried", g, false)
	e.record(run)

	c := mustCard(t, res.Cards, "j1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, "finished on run 2", outputText(c))
	require.EqualValues(t, 2, g.runs.Load())
}

// The worker is lost while a non-idempotent tool runs: it is not run
// again; the call fails "outcome unknown" and the model is told so.
func TestCrashNonIdempotentToolEndsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	g := newGate(t, "job", false, false)
	e, run, res := crashTurn(t, "crash_outcome_unknown", g, true)
	e.record(run)

	c := mustCard(t, res.Cards, "j1")
	require.Equal(t, results.StateFailed, c.State)
	require.Equal(t, results.FailureOutcomeUnknown, c.Failure.Reason, "%+v", c.Failure)
	require.EqualValues(t, 1, g.runs.Load(), "nothing runs twice by surprise")
	require.Equal(t, []string{"j1 error=true " + errorText(results.OutcomeUnknownMessage)}, toolTexts(res.Messages))
}

// A graceful stop (a deploy, Ctrl-C) whose stop timeout cancels a running
// tool is a lost worker too: the tool honours the cancellation and
// returns, and the call must still be retried or reported as unknown,
// never as an internal error.
func TestCrashGracefulStopCancelsToolIdempotentRetried(t *testing.T) {
	t.Parallel()
	g := newGate(t, "job", true, true)
	_, _, res := crashTurn(t, "crash_graceful_idempotent", g, false)
	c := mustCard(t, res.Cards, "j1")
	require.Equal(t, results.StateSucceeded, c.State, "%+v", c.Failure)
	require.Equal(t, "finished on run 2", outputText(c))
}

func TestCrashGracefulStopCancelsToolNonIdempotentOutcomeUnknown(t *testing.T) {
	t.Parallel()
	g := newGate(t, "job", false, true)
	_, _, res := crashTurn(t, "crash_graceful_nonidempotent", g, true)
	c := mustCard(t, res.Cards, "j1")
	require.Equal(t, results.StateFailed, c.State)
	require.Equal(t, results.FailureOutcomeUnknown, c.Failure.Reason, "%+v", c.Failure)
	require.EqualValues(t, 1, g.runs.Load())
}

// The worker stops while calls wait, and people answer while no worker
// runs:
//   - an Update needs a worker to run its validator, so the caller blocks
//     until a worker arrives or until its own deadline. A caller that gives
//     up gets WorkflowUpdateServiceTimeoutOrCanceledError, which is neither
//     a rejection nor a promise: the server may deliver the update when a
//     worker starts, or lose it. Sending it again with the same update id
//     is safe: the server deduplicates by id.
//   - a Signal is recorded by the server at once, with no worker, and
//     applied when a worker starts.
//   - an Update that is still waiting when a worker starts completes.
//
// A new worker then finishes the turn, every call approved exactly once.
func TestCrashAnswersWhileNoWorkerRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "wait_no_worker")
	e.taskTimeout = stoppedWorkerTaskTimeout
	model := e.script(
		reply("",
			call("w1", "write_file", map[string]string{"path": "a.md", "content": "A"}),
			call("w2", "write_file", map[string]string{"path": "b.md", "content": "B"}),
			call("w3", "write_file", map[string]string{"path": "c.md", "content": "C"}),
		),
		expecting(reply("All three written."), 3, ""),
	)
	first := e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write three files", Model: model, Tools: []string{"write_file"}})
	e.waitState(run, "three calls waiting", func(s workflows.State) bool {
		if len(s.Cards) != 3 {
			return false
		}
		for _, c := range s.Cards {
			if c.State != results.StatePendingApproval {
				return false
			}
		}
		return true
	})
	e.stopWorker(first)

	// An Update that waits as long as it takes, sent the way a caller that
	// must not lose an answer sends it.
	type outcome struct {
		card results.Card
		err  error
	}
	waiting := make(chan outcome, 1)
	go func() {
		c, err := respondReliably(e.caller, run, "approve-w3", workflows.Response{CallID: "w3", Decision: results.DecisionApprove, By: "patient"})
		waiting <- outcome{c, err}
	}()

	// An Update whose caller gives up after a second.
	approveW1 := workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "impatient"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	began := time.Now()
	_, err := updateOnce(ctx, e.caller, run, "approve-w1", approveW1)
	cancel()
	require.GreaterOrEqual(t, time.Since(began), time.Second, "the update blocked until its deadline")
	var timeout *client.WorkflowUpdateServiceTimeoutOrCanceledError
	require.ErrorAs(t, err, &timeout)

	// The Signal needs no worker.
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	require.NoError(t, e.caller.SignalWorkflow(sctx, run.GetID(), run.GetRunID(), workflows.RespondName, workflows.Response{CallID: "w2", Decision: results.DecisionApprove, By: "webhook"}))

	select {
	case o := <-waiting:
		t.Fatalf("the update returned with no worker running: %+v", o)
	default:
	}
	require.NoFileExists(t, filepath.Join(e.ws, "a.md"))

	e.startWorker()
	o := <-waiting
	require.NoError(t, o.err, "the update that waited for a worker (%T)", o.err)
	require.Equal(t, "w3", o.card.CallID)

	// The abandoned update may have been delivered to the new worker, or
	// lost with a workflow task the stopping worker's last poll took. Sent
	// again under its id, it is applied once either way.
	c, err := respondReliably(e.caller, run, "approve-w1", approveW1)
	require.NoError(t, err)
	require.Equal(t, "w1", c.CallID)

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	for _, id := range []string{"w1", "w2", "w3"} {
		c := mustCard(t, res.Cards, id)
		require.Equal(t, results.StateSucceeded, c.State, id)
		require.Len(t, c.Decisions, 1, "%s was approved exactly once", id)
	}
	require.Equal(t, "impatient", mustCard(t, res.Cards, "w1").Decisions[0].By)
	require.Equal(t, "webhook", mustCard(t, res.Cards, "w2").Decisions[0].By)
	require.Equal(t, "patient", mustCard(t, res.Cards, "w3").Decisions[0].By)
	for _, f := range []string{"a.md", "b.md", "c.md"} {
		require.FileExists(t, filepath.Join(e.ws, f))
	}
	e.record(run)
}

// The embedded dev server (SQLite in a file) stops and starts again
// between the park and the answer: the parked turn is still there and
// finishes when answered.
func TestCrashDevServerRestartBetweenParkAndAnswer(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "temporal.db")
	port, err := devserver.FreePort()
	require.NoError(t, err)
	srv := startDevServer(t, db, port)
	e := newEnvAt(t, "server_restart", srv.Address(), "default")
	e.taskTimeout = stoppedWorkerTaskTimeout
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "survived"})),
		expecting(reply("Written after the restart."), 1, "created a.md"),
	)
	first := e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write a.md", Model: model, Tools: []string{"write_file"}})
	e.waitCard(run, "w1", results.StatePendingApproval)

	// The whole process goes: worker, then server.
	e.stopWorker(first)
	srv.stop(t)
	srv = startDevServer(t, db, port)
	// Workers and clients go before this server does.
	t.Cleanup(e.stopAll)

	e.caller = e.dial("e2e-starter-after-restart")
	run = e.caller.GetWorkflow(context.Background(), run.GetID(), run.GetRunID())
	e.startWorker()
	s := e.waitCard(run, "w1", results.StatePendingApproval)
	require.Equal(t, workflows.StatusWaiting, s.Status)

	_, err = respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice"})
	require.NoError(t, err)
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	b, err := os.ReadFile(filepath.Join(e.ws, "a.md"))
	require.NoError(t, err)
	require.Equal(t, "survived", string(b))
	e.record(run)
}

// devServer is an embedded server the test may stop before its cleanup
// does.
type devServer struct {
	*devserver.Server
	stopped bool
}

func (d *devServer) stop(t *testing.T) {
	t.Helper()
	if !d.stopped {
		d.stopped = true
		require.NoError(t, d.Server.Stop())
	}
}

func startDevServer(t *testing.T, db string, port int) *devServer {
	t.Helper()
	srv, err := devserver.Start(devserver.Options{DatabasePath: db, Port: port})
	require.NoError(t, err)
	d := &devServer{Server: srv}
	t.Cleanup(func() {
		if !d.stopped {
			d.stopped = true
			_ = srv.Stop()
		}
	})
	return d
}
