package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// The worker is lost while a local tool runs: no marker was written, so
// the workflow task times out and the next worker runs the tool again.
// The call is retried, never lost, and the first run's late answer does
// not count.
func TestCrashLocalToolIsRetriedOnAnotherWorker(t *testing.T) {
	t.Parallel()
	g := newGate(t, "peek_job", true, false)
	g.spec.Local = true
	e := newEnv(t, "local_tool_crash_retried", g)
	e.taskTimeout = stoppedWorkerTaskTimeout
	model := e.script(
		reply("Looking.", call("p1", g.spec.Name, map[string]string{"job": "scan"})),
		expecting(reply("Done."), 1, "finished on run 2"),
	)
	first := e.startWorker()
	run := e.start(workflows.Input{Prompt: "Scan", Model: model, Tools: []string{g.spec.Name}})
	g.waitStarted(t, 1)

	// The first run ignores cancellation, like a hung host: stop its
	// worker without waiting for it.
	stopped := make(chan struct{})
	go func() { defer close(stopped); e.stopWorker(first) }()
	e.startWorker()
	res := e.result(run)
	<-stopped
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	c := mustCard(t, res.Cards, "p1")
	require.Equal(t, results.StateSucceeded, c.State, "%+v", c.Failure)
	require.Equal(t, "finished on run 2", outputText(c))
	require.EqualValues(t, 2, g.runs.Load())

	events := e.history(run)
	require.Zero(t, scheduled(events, activities.RunToolName, ""), "a local tool schedules no activity")
	require.Equal(t, 1, localRuns(events, activities.RunLocalToolName), "one marker: the run that finished")
	e.record(run)
}

// Local tools of a turn on one worker: read_file and list_dir run as
// local activities (markers, no activity tasks) with their usual typed
// results; a tool that is not idempotent runs as an activity.
func TestLocalToolsRunInTheWorkflowTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "local_tools", stamp())
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte("buy milk\n"), 0o644))
	model := e.script(
		reply("", call("r1", "read_file", map[string]string{"path": "notes.txt"}), call("l1", "list_dir", map[string]string{}), call("s1", "stamp", map[string]string{"name": "s1"})),
		expecting(reply("Read it."), 3, "buy milk"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Read my notes", Model: model, Tools: []string{"read_file", "list_dir", "stamp"}})
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "buy milk\n", outputText(mustCard(t, res.Cards, "r1")))
	require.Contains(t, outputText(mustCard(t, res.Cards, "l1")), "notes.txt")

	events := e.history(run)
	require.Equal(t, 2, localRuns(events, activities.RunLocalToolName))
	require.Equal(t, 1, scheduled(events, activities.RunToolName, ""), "only the stamp call is an activity")
	e.record(run)
}

// Two workers with workspaces of their own. A turn pinned to worker A
// keeps running its file calls on A after its workflow moves to worker B:
// B's local read_file and list_dir bounce to A's queue, and every file
// the turn writes is on A's disk.
func TestWorkspaceCallsLandOnThePinnedWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "workspace_pinned", stamp())
	e.taskTimeout = stoppedWorkerTaskTimeout
	model := e.script(
		reply("", call("s1", "stamp", map[string]string{"name": "s1"}), call("w1", "write_file", map[string]string{"path": "w1.md", "content": "W"})),
		expecting(reply("", call("r1", "read_file", map[string]string{"path": "s1"}), call("l1", "list_dir", map[string]string{}), call("s2", "stamp", map[string]string{"name": "s2"})), 2, "stamped s1"),
		expecting(reply("All on one disk."), 3, "stamped s2"),
	)
	a := startPinned(e, "a")
	run := e.start(workflows.Input{Prompt: "Stamp", Model: model, Tools: []string{"stamp", "write_file", "read_file", "list_dir"}})
	e.waitCard(run, "w1", results.StatePendingApproval)

	// The turn's workflow moves to B; A keeps only its workspace worker.
	b := startPinned(e, "b")
	e.stopWorker(a.main)
	_, err := respondReliably(e.caller, run, "approve-w1", workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice"})
	require.NoError(t, err)
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	for _, id := range []string{"s1", "w1", "r1", "l1", "s2"} {
		require.Equal(t, results.StateSucceeded, mustCard(t, res.Cards, id).State, id)
	}
	require.Equal(t, "stamped s1", outputText(mustCard(t, res.Cards, "r1")))
	require.Equal(t, []string{"s1", "s2", "w1.md"}, files(t, a.dir))
	require.Empty(t, files(t, b.dir), "nothing of the turn reached B's disk")

	events := e.history(run)
	require.Equal(t, 5, scheduled(events, activities.RunToolName, a.queue), "s1, w1, s2 and the bounced r1 and l1 ran on A's queue")
	require.Zero(t, localRuns(events, activities.RunLocalToolName), "B does not hold the workspace, so no local run completed there")
	e.record(run)
}

// The pinned worker is gone: the call waits policy.workspace_timeout,
// fails with a tool error that names no worker, and the turn re-pins to
// the worker now running it, where its next file call runs.
func TestWorkspaceWorkerLostFailsClearlyAndTheTurnRepins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "workspace_worker_lost", stamp())
	e.taskTimeout = stoppedWorkerTaskTimeout
	const wait = 2 * time.Second
	unavailable := "the workspace's worker is unavailable"
	model := e.script(
		reply("", call("s1", "stamp", map[string]string{"name": "s1"}), call("w1", "write_file", map[string]string{"path": "w1.md", "content": "W"})),
		expecting(reply("", call("s2", "stamp", map[string]string{"name": "s2"})), 2, unavailable),
		expecting(reply("Moved."), 1, "stamped s2"),
	)
	a := startPinned(e, "a")
	run := e.start(workflows.Input{Prompt: "Stamp", Model: model, Tools: []string{"stamp", "write_file"},
		Policy: workflows.Policy{WorkspaceTimeout: workflows.Duration(wait)}})
	e.waitCard(run, "w1", results.StatePendingApproval)
	// s1 runs beside w1's wait, on A's workspace queue: A must have run it
	// before it goes, or s1 too meets a lost worker.
	e.waitCard(run, "s1", results.StateSucceeded)

	b := startPinned(e, "b")
	e.stopWorker(a.main)
	e.stopWorker(a.ws)
	_, err := respondReliably(e.caller, run, "approve-w1", workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice"})
	require.NoError(t, err)
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)

	w1 := mustCard(t, res.Cards, "w1")
	require.Equal(t, results.StateFailed, w1.State)
	require.Equal(t, results.FailureToolError, w1.Failure.Reason)
	require.Contains(t, w1.Failure.Message, unavailable)
	require.NotContains(t, w1.Failure.Message, a.queue)
	require.NotContains(t, w1.Failure.Message, "/ws/")
	require.Equal(t, results.StateSucceeded, mustCard(t, res.Cards, "s2").State)
	require.Equal(t, []string{"s1"}, files(t, a.dir))
	require.Equal(t, []string{"s2"}, files(t, b.dir), "after the re-pin, file calls run on B")
	e.record(run)
}

// A session's second turn works in the first turn's workspace although
// another worker runs it: the first worker's workflow worker is gone, its
// workspace worker is not, and the second turn's file call lands there.
func TestSessionTurnsStayInOneWorkspace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "session_workspace", stamp())
	e.taskTimeout = stoppedWorkerTaskTimeout
	model := e.script(
		reply("", call("s1", "stamp", map[string]string{"name": "s1"})),
		expecting(reply("One."), 1, "stamped s1"),
		expecting(reply("", call("s2", "stamp", map[string]string{"name": "s2"})), 0, "again"),
		expecting(reply("Two."), 1, "stamped s2"),
	)
	a := startPinned(e, "a")
	run := e.startSession(workflows.SessionInput{Turn: workflows.Input{Model: model, Tools: []string{"stamp"}, User: "ada"}})
	id := run.GetID()
	first := e.turnResult(e.send(id, "u1", "Stamp").TurnID)
	require.Equal(t, workflows.StatusCompleted, first.Status, first.Error)
	require.Equal(t, a.queue, first.Workspace, "the result says where the workspace is")

	// The session and its next turn move to B; A keeps only its
	// workspace worker.
	b := startPinned(e, "b")
	e.stopWorker(a.main)
	second := e.send(id, "u2", "Stamp again")
	res := e.turnResult(second.TurnID)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, results.StateSucceeded, mustCard(t, res.Cards, "s2").State)
	require.Equal(t, a.queue, res.Workspace)
	require.Equal(t, []string{"s1", "s2"}, files(t, a.dir), "both turns' files are in one workspace")
	require.Empty(t, files(t, b.dir))
	turn2 := e.caller.GetWorkflow(context.Background(), second.TurnID, "")
	require.Equal(t, 1, scheduled(e.history(turn2), activities.RunToolName, a.queue))

	e.end(id, workflows.End{By: "ada"})
	e.sessionResult(id)
	e.recordTo(sessionCorpusDir, "session_workspace", id, run.GetRunID())
	e.recordTo(corpusDir, "session_workspace_turn", second.TurnID, "")
}

// pinned is one worker process with a workspace of its own: its workflow
// worker and the worker polling its workspace queue.
type pinned struct {
	main, ws *runningWorker
	queue    string
	dir      string
}

// startPinned starts a worker as `worker --worker-id id` does, with its own
// workspace directory.
func startPinned(e *env, id string) pinned {
	e.t.Helper()
	dir := e.t.TempDir()
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		DataDir:     e.data,
		Workspace:   dir,
		Models:      providers.Config{ScriptDir: e.scripts},
		Tools:       e.tools,
		Connections: e.conns,
	})
	require.NoError(e.t, err)
	queue := tollgate.WorkspaceQueue(e.tq, id)
	require.NoError(e.t, plugin.PinWorkspace(queue))
	c := e.dial("e2e-worker-" + id)
	wsw := worker.New(c, queue, worker.Options{DisableWorkflowWorker: true, WorkerStopTimeout: 100 * time.Millisecond})
	plugin.RegisterWorkspace(wsw)
	require.NoError(e.t, wsw.Start())
	mw := worker.New(c, e.tq, worker.Options{Plugins: []worker.Plugin{plugin}, WorkerStopTimeout: 100 * time.Millisecond})
	require.NoError(e.t, mw.Start())
	p := pinned{main: &runningWorker{w: mw, c: c}, ws: &runningWorker{w: wsw, c: c}, queue: queue, dir: plugin.Workspace()}
	e.mu.Lock()
	e.workers = append(e.workers, p.main, p.ws)
	e.mu.Unlock()
	return p
}

// stamp is a workspace tool that is neither local nor waiting: it writes
// a file named by its argument into the workspace it runs in.
func stamp() tool.Tool {
	type args struct {
		Name string `json:"name"`
	}
	return tool.MustFunc(tool.Spec{Name: "stamp", Description: "Stamp a file.", Idempotent: true, Concurrent: true, Workspace: true},
		func(_ context.Context, call tool.Call, a args) (results.Outcome, error) {
			if err := os.WriteFile(filepath.Join(call.Workspace, a.Name), []byte("stamped "+a.Name), 0o644); err != nil {
				return results.Outcome{}, fmt.Errorf("stamp: %w", err)
			}
			return results.SucceedText("stamped " + a.Name), nil
		})
}

// files lists a directory's names, sorted.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// scheduled counts the activities of type typ scheduled on queue (any
// queue when empty).
func scheduled(events []*historypb.HistoryEvent, typ, queue string) int {
	n := 0
	for _, ev := range events {
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a != nil && a.GetActivityType().GetName() == typ && (queue == "" || a.GetTaskQueue().GetName() == queue) {
			n++
		}
	}
	return n
}

// localRuns counts the markers of local activities of type typ that
// completed (DescribeTools is a local activity too).
func localRuns(events []*historypb.HistoryEvent, typ string) int {
	n := 0
	for _, ev := range events {
		if ev.GetEventType() != enumspb.EVENT_TYPE_MARKER_RECORDED {
			continue
		}
		m := ev.GetMarkerRecordedEventAttributes()
		if m.GetMarkerName() != "LocalActivity" || m.GetFailure() != nil {
			continue
		}
		for _, p := range m.GetDetails()["data"].GetPayloads() {
			if bytes.Contains(p.GetData(), []byte(`"`+typ+`"`)) {
				n++
			}
		}
	}
	return n
}
