package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/agents"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// agentsWorkerEnv writes the env's agents to an agents file and returns
// the environment that gives a worker process that file, the env's
// scripts, and the shell (the tests run as root in CI containers).
func (e *env) agentsWorkerEnv() []string {
	e.t.Helper()
	b, err := json.Marshal(agents.File{Agents: e.agents})
	require.NoError(e.t, err)
	file := filepath.Join(e.t.TempDir(), "agents.json")
	require.NoError(e.t, os.WriteFile(file, b, 0o600))
	return []string{agents.Env + "=" + file, "TOLLGATE_SCRIPTS_DIR=" + e.scripts, "TOLLGATE_ALLOW_ROOT_SHELL=1"}
}

// agentProcs is a test of agents that run in worker processes: its env,
// whose agents the test sets, and the worker binary, built meanwhile.
type agentProcs struct {
	*env
	build func() string
	vars  []string
}

// newAgentProcs starts building the worker binary and makes the test's
// env; such tests are skipped with -short.
func newAgentProcs(t *testing.T, name string) *agentProcs {
	t.Helper()
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the worker binary and runs it as a subprocess")
	}
	build := buildWorker(t)
	return &agentProcs{env: newEnv(t, name), build: build}
}

// startProcess starts worker process n with the env's agents and scripts.
func (p *agentProcs) startProcess(n string) *workerProcess {
	p.t.Helper()
	if p.vars == nil {
		p.vars = p.agentsWorkerEnv()
	}
	return startWorkerProcess(p.t, p.env, p.build(), n, p.vars...)
}

// waitChildWaiting waits until the calling card of each call lists one
// call waiting in its agent.
func (e *env) waitChildWaiting(run client.WorkflowRun, calls ...string) {
	e.t.Helper()
	e.waitState(run, "a wait of the called agent on the calling card of "+strings.Join(calls, ", "), func(s workflows.State) bool {
		for _, id := range calls {
			c, ok := card(s.Cards, id)
			if !ok || c.Agent == nil || len(c.Agent.Waiting) != 1 {
				return false
			}
		}
		return true
	})
}

// respondThrough answers a call through the top turn with the public
// client, as the gateway and the starter do, trying again while no worker
// can run the Update's validator.
func respondThrough(t *testing.T, tg tollgate.Client, turnID string, r workflows.Response) results.Card {
	t.Helper()
	deadline := time.Now().Add(2 * waitTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := tg.Respond(ctx, turnID, r)
		cancel()
		var rejected *temporal.ApplicationError
		if err == nil {
			return c
		}
		require.False(t, errors.As(err, &rejected), "the response was refused: %v", err)
		require.False(t, time.Now().After(deadline), "no answer to %s: %v", r.CallID, err)
		time.Sleep(100 * time.Millisecond)
	}
}

// childResult waits for a child turn's result.
func (e *env) childResult(id string) workflows.Result {
	e.t.Helper()
	run := e.caller.GetWorkflow(context.Background(), id, "")
	e.track(run)
	return e.result(run)
}

// waitFile waits until the workspace holds name: a tool got that far.
func (e *env) waitFile(name string) {
	e.t.Helper()
	require.True(e.t, eventually(func() bool {
		_, err := os.Stat(filepath.Join(e.ws, name))
		return err == nil
	}), "%s never appeared in the workspace", name)
}

// The worker process is SIGKILLed while a called agent's call waits for
// approval: a new worker process takes the turns over, the approval sent
// to the top turn under the child's call id reaches the child, and the
// whole chain finishes.
func TestAgentChildApprovalSurvivesAWorkerSIGKILL(t *testing.T) {
	e := newAgentProcs(t, "agent_sigkill_wait")
	e.agents = []workflows.Agent{
		{Name: "boss", Model: e.scriptFor("boss",
			reply("", call("c1", "agent_helper", map[string]string{"task": "write hi.txt"})),
			expecting(reply("Done: hi.txt is written."), 1, "I wrote hi.txt"),
		), Tools: []string{"agent:helper"}},
		{Name: "helper", Description: "Writes files.", Model: e.scriptFor("helper",
			reply("", call("w1", "write_file", map[string]string{"path": "hi.txt", "content": "hi"})),
			expecting(reply("I wrote hi.txt"), 1, "created hi.txt"),
		), Tools: []string{"write_file"}},
	}
	first := e.startProcess("1")
	run := e.start(workflows.Input{Agent: "boss", Prompt: "Please write hi.txt"})
	e.waitChildWaiting(run, "c1")

	first.kill(t)
	e.startProcess("2")
	tg := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}
	got := respondThrough(t, tg, run.GetID(), workflows.Response{CallID: "c1/w1", Decision: results.DecisionApprove, By: "ann"})
	require.Equal(t, "w1", got.CallID)

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Done: hi.txt is written.", res.Text)
	c := mustCard(t, res.Cards, "c1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, "I wrote hi.txt", outputText(c))
	child := e.childResult(workflows.ChildTurnID(run.GetID(), "c1"))
	w := mustCard(t, child.Cards, "w1")
	require.Equal(t, results.StateSucceeded, w.State)
	require.Len(t, w.Decisions, 1, "approved once")
	b, err := os.ReadFile(filepath.Join(e.ws, "hi.txt"))
	require.NoError(t, err)
	require.Equal(t, "hi", string(b))
}

// Cancelling the top turn while one called agent's call waits for
// approval and another's tool runs: every call of every child is
// answered, each child ends cancelled, and so does the top turn, with its
// agent calls failed saying why.
func TestAgentCancelOfTheParentAnswersEveryChildCall(t *testing.T) {
	e := newAgentProcs(t, "agent_cancel_tree")
	e.agents = []workflows.Agent{
		{Name: "boss", Model: e.scriptFor("boss",
			reply("",
				call("c1", "agent_writer", map[string]string{"task": "write a.md"}),
				call("c2", "agent_runner", map[string]string{"task": "run the job"})),
		), Tools: []string{"agent:writer", "agent:runner"}},
		{Name: "writer", Model: e.scriptFor("writer",
			reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "x"})),
		), Tools: []string{"write_file"}},
		{Name: "runner", Model: e.scriptFor("runner",
			reply("", call("s1", "shell", map[string]string{"command": "touch started && sleep 120"})),
		), Tools: []string{"shell"}},
	}
	e.startProcess("1")
	run := e.start(workflows.Input{Agent: "boss", Prompt: "Write and run"})
	e.waitChildWaiting(run, "c1", "c2")
	tg := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}
	respondThrough(t, tg, run.GetID(), workflows.Response{CallID: "c2/s1", Decision: results.DecisionApprove, By: "ann"})
	e.waitFile("started")

	require.NoError(t, e.caller.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
	res := e.result(run)
	require.Equal(t, workflows.StatusCancelled, res.Status)
	for _, id := range []string{"c1", "c2"} {
		c := mustCard(t, res.Cards, id)
		require.Equal(t, results.StateFailed, c.State, id)
		require.Contains(t, c.Failure.Message, "cancelled while the agent", id)
	}
	require.Len(t, toolTexts(res.Messages), 2, "both agent calls are answered")

	writer := e.childResult(workflows.ChildTurnID(run.GetID(), "c1"))
	require.Equal(t, workflows.StatusCancelled, writer.Status)
	w := mustCard(t, writer.Cards, "w1")
	require.Equal(t, results.StateRefused, w.State)
	require.Len(t, toolTexts(writer.Messages), 1, "the waiting call is answered")
	require.NoFileExists(t, filepath.Join(e.ws, "a.md"))

	runner := e.childResult(workflows.ChildTurnID(run.GetID(), "c2"))
	require.Equal(t, workflows.StatusCancelled, runner.Status)
	s := mustCard(t, runner.Cards, "s1")
	require.Equal(t, results.StateFailed, s.State)
	require.Contains(t, s.Failure.Message, "cancelled while this tool ran")
	require.Len(t, toolTexts(runner.Messages), 1, "the running call is answered")
}

// The worker process is SIGKILLed while a called agent's non-idempotent
// tool runs: the tool is not run again, the child's call ends "outcome
// unknown", and the calling turn's model reads so in the agent call's
// result whatever the child's own model made of it.
func TestAgentChildOutcomeUnknownReachesTheParentAfterSIGKILL(t *testing.T) {
	e := newAgentProcs(t, "agent_sigkill_unknown")
	e.taskTimeout = stoppedWorkerTaskTimeout
	e.agents = []workflows.Agent{
		{Name: "boss", Model: e.scriptFor("boss",
			reply("", call("c1", "agent_runner", map[string]string{"task": "run the job"})),
			expecting(reply("The job may or may not have run."), 1, results.OutcomeUnknownMessage),
		), Tools: []string{"agent:runner"}},
		{Name: "runner", Model: e.scriptFor("runner",
			reply("", call("s1", "shell", map[string]string{"command": "echo run >> runs && touch started && sleep 120"})),
			expecting(reply("The job was started."), 1, results.OutcomeUnknownMessage),
		), Tools: []string{"shell"}},
	}
	first := e.startProcess("1")
	run := e.start(workflows.Input{Agent: "boss", Prompt: "Run the job"})
	e.waitChildWaiting(run, "c1")
	tg := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}
	respondThrough(t, tg, run.GetID(), workflows.Response{CallID: "c1/s1", Decision: results.DecisionApprove, By: "ann"})
	e.waitFile("started")

	first.kill(t)
	e.startProcess("2")
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	c := mustCard(t, res.Cards, "c1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Contains(t, outputText(c), "The job was started.")
	require.Contains(t, outputText(c), "s1 (shell): "+results.OutcomeUnknownMessage, "the parent's model is told, not only the child's")

	child := e.childResult(workflows.ChildTurnID(run.GetID(), "c1"))
	s := mustCard(t, child.Cards, "s1")
	require.Equal(t, results.StateFailed, s.State)
	require.Equal(t, results.FailureOutcomeUnknown, s.Failure.Reason, "%+v", s.Failure)
	b, err := os.ReadFile(filepath.Join(e.ws, "runs"))
	require.NoError(t, err)
	require.Equal(t, "run\n", string(b), "the command ran once")
}
