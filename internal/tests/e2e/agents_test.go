package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// scriptFor writes one agent's script beside the test's and returns its
// model string.
func (e *env) scriptFor(agent string, replies ...scripted.Reply) string {
	e.t.Helper()
	b, err := json.MarshalIndent(scripted.Script{Replies: replies}, "", "  ")
	require.NoError(e.t, err)
	file := e.name + "." + agent + ".json"
	require.NoError(e.t, os.WriteFile(filepath.Join(e.scripts, file), b, 0o600))
	return "scripted:" + file
}

// An agent called as a tool asks for approval inside its own turn: the
// wait shows on the calling card of the parent, the parent lists as
// waiting, and the approval sent to the parent under the child's call id
// reaches the child, which runs the tool and answers the parent.
func TestAgentChildApprovalIsAnsweredThroughTheParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "agent_child_approval")
	e.agents = []workflows.Agent{
		{Name: "boss", Instructions: "You delegate.", Model: e.scriptFor("boss",
			reply("", call("c1", "agent_helper", map[string]string{"task": "write hi.txt"})),
			expecting(reply("Done: hi.txt is written."), 1, "I wrote hi.txt"),
		), Tools: []string{"agent:helper"}},
		{Name: "helper", Description: "Writes files.", Model: e.scriptFor("helper",
			reply("", call("w1", "write_file", map[string]string{"path": "hi.txt", "content": "hi"})),
			expecting(reply("I wrote hi.txt"), 1, ""),
		), Tools: []string{"write_file"}, Policy: workflows.Policy{Approval: map[string]string{"write_file": "always"}}},
	}
	e.startWorker()
	tg := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	listed, err := tg.Agents(ctx)
	require.NoError(t, err)
	require.Len(t, listed, 2)
	require.Equal(t, workflows.AgentInfo{Name: "helper", Description: "Writes files.", Model: e.agents[1].Model, Tools: []string{"write_file"}}, listed[1])

	run := e.start(workflows.Input{Agent: "boss", Prompt: "Please write hi.txt"})
	s := e.waitState(run, "the child's approval on the calling card", func(s workflows.State) bool {
		c, ok := card(s.Cards, "c1")
		return ok && c.Agent != nil && len(c.Agent.Waiting) == 1
	})
	require.Equal(t, workflows.StatusWaiting, s.Status)
	require.Contains(t, e.coroutines(run), "receiveChildWaits", "a turn that calls agents hears their waits")
	c := mustCard(t, s.Cards, "c1")
	require.Equal(t, results.StateRunning, c.State)
	require.Equal(t, []string{"boss", "helper"}, c.Agent.Chain)
	require.Equal(t, run.GetID()+"/c1", c.Agent.Turn)
	w := c.Agent.Waiting[0]
	require.Equal(t, "c1/w1", w.CallID)
	require.Equal(t, "write_file", w.Tool)
	require.Equal(t, results.StatePendingApproval, w.State)

	got, err := tg.Respond(ctx, run.GetID(), workflows.Response{CallID: "c1/w1", Decision: results.DecisionApprove, By: "ann"})
	require.NoError(t, err)
	require.Equal(t, "w1", got.CallID, "the child's own card comes back")
	require.Equal(t, results.DecisionApprove, got.Decisions[0].Decision)

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Done: hi.txt is written.", res.Text)
	done := mustCard(t, res.Cards, "c1")
	require.Equal(t, results.StateSucceeded, done.State)
	require.Equal(t, "I wrote hi.txt", outputText(done))
	require.Empty(t, done.Agent.Waiting)
	b, err := os.ReadFile(filepath.Join(e.ws, "hi.txt"))
	require.NoError(t, err)
	require.Equal(t, "hi", string(b))
	// Four model calls: two of each agent, counted in the parent.
	require.Positive(t, res.Usage.InputTokens)
	e.record(run)
}

// coroutines is the running turn's goroutines as the SDK's built-in
// stack trace query lists them.
func (e *env) coroutines(run client.WorkflowRun) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	v, err := e.caller.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), client.QueryTypeStackTrace)
	require.NoError(e.t, err)
	var st string
	require.NoError(e.t, v.Get(&st))
	return st
}

// A parked turn that cannot call an agent holds no coroutine for child
// turns' waits: an idle goroutine per parked turn is memory that a worker
// with thousands of them pays for.
func TestAParkedTurnWithoutAgentsHoldsNoChildWaitsReceiver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "approval_without_agents")
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "a.txt", "content": "a"})),
		expecting(reply("Written."), 1, "created a.txt"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write a.txt", Model: model, Tools: []string{"write_file"}})
	e.waitCard(run, "w1", results.StatePendingApproval)
	st := e.coroutines(run)
	require.Contains(t, st, "receiveSignals", "the trace lists the turn's coroutines")
	require.NotContains(t, st, "receiveChildWaits")

	_, err := respond(e.dial("e2e-approver"), run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "ann"})
	require.NoError(t, err)
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Written.", res.Text)
	e.record(run)
}

// In a session of named agents a transfer hands the conversation to its
// target at once: the target answers in the next turn with its own
// instructions, the session stays open and records who held it when.
func TestSessionHandsOffToANamedAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "session_handoff")
	e.agents = []workflows.Agent{
		{Name: "triage", Instructions: "You route.", Model: e.scriptFor("triage",
			reply("Billing will take it.", call("h1", "transfer_to_billing", map[string]any{"message": "refund of order 7", "now": true})),
		), Handoffs: []string{"billing"}},
		{Name: "billing", Instructions: "You bill.", Model: e.scriptFor("billing",
			reply("unused: reply 0 answers a conversation with no assistant message"),
			expecting(reply("Refunded order 7."), 1, "Transferred the conversation to billing"),
			expecting(reply("You are welcome."), 0, "thanks"),
		)},
	}
	e.startWorker()
	run := e.startSession(workflows.SessionInput{Turn: workflows.Input{Agent: "triage"}})
	id := run.GetID()
	require.Equal(t, workflows.StatusTransferred, e.turnResult(e.send(id, "u1", "refund order 7").TurnID).Status)
	c := e.conversation(id, "billing's own turn", func(c workflows.Conversation) bool {
		return len(c.Turns) == 2 && c.Turns[1].Status == workflows.StatusCompleted
	})
	require.Equal(t, workflows.SessionOpen, c.Status)
	require.Equal(t, "billing", c.Agent)
	require.Equal(t, "Refunded order 7.", c.Turns[1].Reply)
	require.Equal(t, "billing", c.Turns[1].Agent)
	require.Equal(t, "You are welcome.", e.turnResult(e.send(id, "u2", "thanks").TurnID).Text)
	done := e.end(id, workflows.End{By: "ada"})
	require.Len(t, done.Holders, 2)
	require.Equal(t, "triage", done.Holders[1].From)
	require.True(t, done.Holders[1].Now)
	e.recordTo(sessionCorpusDir, "session_handoff", id, run.GetRunID())
}

// Two agents called as tools in one step run at once: the parent starts
// both children before either ends, and each one's text becomes its
// calling card's output.
func TestSubAgentsOfOneStepRunInParallel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "agents_parallel")
	e.agents = []workflows.Agent{
		{Name: "lead", Instructions: "You delegate.", Model: e.scriptFor("lead",
			reply("", call("c1", "agent_orders", map[string]string{"task": "order 7"}), call("c2", "agent_payments", map[string]string{"task": "order 7"})),
			expecting(reply("Order 7 shipped and was paid."), 2, "paid by card"),
		), Tools: []string{"agent:orders", "agent:payments"}},
		{Name: "orders", Description: "Knows orders.", Model: e.scriptFor("orders", reply("shipped on Monday"))},
		{Name: "payments", Description: "Knows payments.", Model: e.scriptFor("payments", reply("paid by card"))},
	}
	e.startWorker()

	run := e.start(workflows.Input{Agent: "lead", Prompt: "What happened to order 7?"})
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Order 7 shipped and was paid.", res.Text)
	require.Equal(t, "shipped on Monday", outputText(mustCard(t, res.Cards, "c1")))
	require.Equal(t, "paid by card", outputText(mustCard(t, res.Cards, "c2")))

	started, ended := 0, 0
	for _, ev := range e.history(run) {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			require.Zero(t, ended, "a child started after another ended: the step's agents ran one after the other")
			started++
		case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
			ended++
		}
	}
	require.Equal(t, 2, started)
	require.Equal(t, 2, ended)
	e.record(run)
}
