package e2e

import (
	"context"
	"fmt"
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

// lowHistory makes a turn continue as new after 400 events (2/5 of its
// guard's 1,000), so a test needs a few hundred events, not thousands.
var lowHistory = workflows.Policy{MaxHistoryEvents: 1000}

// latest is the turn's latest run, whatever run the test started: its
// queries, Updates and Signals name no run.
func (e *env) latest(run client.WorkflowRun) client.WorkflowRun {
	return latestRun{e.caller.GetWorkflow(context.Background(), run.GetID(), "")}
}

// latestRun names no run; the SDK's own run from GetWorkflow resolves ""
// to the run that was current when first asked, and keeps it.
type latestRun struct{ client.WorkflowRun }

func (latestRun) GetRunID() string { return "" }

// runsOf reads the run ids of a turn's chain, oldest first, by following
// each run's continue-as-new event, and the length of each run's history.
func (e *env) runsOf(run client.WorkflowRun) (ids []string, lengths []int) {
	e.t.Helper()
	id := run.GetRunID()
	for id != "" {
		events := e.history(e.caller.GetWorkflow(context.Background(), run.GetID(), id))
		ids, lengths = append(ids, id), append(lengths, len(events))
		last := events[len(events)-1]
		id = ""
		if last.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW {
			id = last.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
	return ids, lengths
}

// A turn of 150 steps continues as new whenever its history reaches the
// threshold: every call runs once, the result shows the last 100 cards
// and counts the rest, and the cards query pages through all 150 across
// the runs, in order.
func TestLongTurnContinuesAsNew(t *testing.T) {
	t.Parallel()
	const n = 150
	e := newEnv(t, "turn_continued")
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte("notes"), 0o600))
	replies := make([]scripted.Reply, 0, n+1)
	for i := 1; i <= n; i++ {
		replies = append(replies, reply(fmt.Sprintf("step %d", i), call(fmt.Sprintf("r%d", i), "read_file", map[string]string{"path": "notes.txt"})))
	}
	replies = append(replies, expecting(reply("Done."), 1, "notes"))
	model := e.script(replies...)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Read the notes many times", Model: model, Tools: []string{"read_file"}, MaxSteps: n + 1, Policy: lowHistory})

	res := e.result(e.latest(run))
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Done.", res.Text)
	require.Equal(t, n+1, res.Steps)
	require.Len(t, res.Cards, 100)
	require.Equal(t, &workflows.CardCounts{Total: n - 100, ByState: map[results.State]int{results.StateSucceeded: n - 100}}, res.Omitted)
	require.Equal(t, fmt.Sprintf("r%d", n), res.Cards[99].CallID)
	// The result starts at the reply the last run continued after, so a
	// session can continue from it.
	require.Equal(t, results.RoleAssistant, res.Messages[0].Role)

	ids, lengths := e.runsOf(run)
	require.GreaterOrEqual(t, len(ids), 3, "the turn continued as new at least twice")
	for i, l := range lengths {
		// The threshold is checked between steps: a run ends within a
		// step of it.
		require.Less(t, l, 460, "run %d of %d has %d events", i+1, len(ids), l)
	}

	c := tollgate.Client{Temporal: e.caller}
	var all []results.Card
	for offset := 0; ; {
		page, err := c.Cards(context.Background(), tollgate.CardsOptions{TurnID: run.GetID(), Offset: offset, Limit: 40})
		require.NoError(t, err)
		require.Equal(t, n, page.Total)
		require.Len(t, page.Runs, len(ids)-1)
		if len(page.Cards) == 0 {
			break
		}
		require.Equal(t, offset, page.Offset)
		all = append(all, page.Cards...)
		offset += len(page.Cards)
	}
	require.Len(t, all, n)
	for i, card := range all {
		require.Equal(t, fmt.Sprintf("r%d", i+1), card.CallID)
		require.Equal(t, results.StateSucceeded, card.State)
	}
}

// A parked turn flooded with invalid Signals continues as new while its
// calls wait, long before the server's 10,000 Signals per run: the calls
// still wait in the new run, the count of invalid Signals carries over,
// and the waits are answered after the boundary, one by Signal and one by
// Update. Each tool runs once. Both runs go to the corpus.
func TestParkedTurnContinuesAsNew(t *testing.T) {
	t.Parallel()
	const flood = 250
	e := newEnv(t, "turn_continued_waiting")
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "a"}),
			call("w2", "write_file", map[string]string{"path": "b.md", "content": "b"})),
		expecting(reply("Written."), 2, "a.md"),
	)
	e.startWorker()
	// The run continues as new from 200 events on.
	run := e.start(workflows.Input{Prompt: "Write a.md and b.md", Model: model, Tools: []string{"write_file"}, Policy: workflows.Policy{MaxHistoryEvents: 500}})
	e.waitCard(run, "w2", results.StatePendingApproval)

	ctx := context.Background()
	for i := range flood {
		bogus := workflows.Response{CallID: fmt.Sprintf("nope-%d", i), Decision: results.DecisionApprove}
		require.NoError(t, e.caller.SignalWorkflow(ctx, run.GetID(), "", workflows.RespondName, bogus))
	}
	latest := e.latest(run)
	s := e.waitState(latest, "every Signal counted", func(s workflows.State) bool { return s.InvalidSignals == flood })
	require.GreaterOrEqual(t, s.Runs, 2, "the parked turn continued as new")
	require.Contains(t, s.LastInvalidSignal, "there is no call")
	require.Equal(t, workflows.StatusWaiting, s.Status)
	for _, id := range []string{"w1", "w2"} {
		require.Equal(t, results.StatePendingApproval, mustCard(t, s.Cards, id).State)
	}

	require.NoError(t, e.caller.SignalWorkflow(ctx, run.GetID(), "", workflows.RespondName,
		workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice"}))
	card, err := respond(e.caller, latest, workflows.Response{CallID: "w2", Decision: results.DecisionApprove, By: "bob"})
	require.NoError(t, err)
	require.Equal(t, "bob", card.Decisions[0].By)

	res := e.result(latest)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, flood, res.InvalidSignals)
	for id, by := range map[string]string{"w1": "alice", "w2": "bob"} {
		c := mustCard(t, res.Cards, id)
		require.Equal(t, results.StateSucceeded, c.State)
		require.Len(t, c.Decisions, 1, "one decision on %s", id)
		require.Equal(t, by, c.Decisions[0].By)
	}
	for file, want := range map[string]string{"a.md": "a", "b.md": "b"} {
		b, err := os.ReadFile(filepath.Join(e.ws, file))
		require.NoError(t, err)
		require.Equal(t, want, string(b))
	}
	ids, _ := e.runsOf(run)
	require.GreaterOrEqual(t, len(ids), 2)
	e.recordRuns(run, ids)
}

// recordRuns writes every run of a turn to the corpus, the first as
// <path>.json and the others as <path>.run<n>.json.
func (e *env) recordRuns(run client.WorkflowRun, ids []string) {
	e.t.Helper()
	name := e.name
	defer func() { e.name = name }()
	for i, id := range ids {
		if i > 0 {
			e.name = fmt.Sprintf("%s.run%d", name, i+1)
		}
		e.record(e.caller.GetWorkflow(context.Background(), run.GetID(), id))
	}
}

// readSteps is n replies of one read_file call each, then "Done.".
func (e *env) readSteps(n int) string {
	require.NoError(e.t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte("notes"), 0o600))
	replies := make([]scripted.Reply, 0, n+1)
	for i := 1; i <= n; i++ {
		replies = append(replies, reply("", call(fmt.Sprintf("r%d", i), "read_file", map[string]string{"path": "notes.txt"})))
	}
	return e.script(append(replies, expecting(reply("Done."), 1, "notes"))...)
}

// A budget reached parks the turn; approved with a new budget (an
// Update) it goes on, denied (a Signal) it ends budget_exhausted with
// every call answered. The history goes to the corpus.
func TestBudgetPauseAnsweredBothWays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "budget_asked")
	model := e.readSteps(5)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Read the notes", Model: model, Tools: []string{"read_file"},
		Policy: workflows.Policy{Budget: workflows.Budget{ToolCalls: 2}}})
	s := e.waitCard(run, "budget_1", results.StatePendingApproval)
	require.Equal(t, workflows.StatusWaiting, s.Status)
	require.Equal(t, workflows.Spent{ModelCalls: 2, ToolCalls: 2, Tokens: s.Budget.Spent.Tokens, WallTime: s.Budget.Spent.WallTime}, s.Budget.Spent)

	_, err := respond(e.caller, run, workflows.Response{CallID: "budget_1", Decision: results.DecisionApprove, Arguments: []byte(`{"tool_calls":3}`), By: "lead"})
	require.NoError(t, err)
	e.waitCard(run, "budget_2", results.StatePendingApproval)
	require.NoError(t, e.caller.SignalWorkflow(context.Background(), run.GetID(), "", workflows.RespondName,
		workflows.Response{CallID: "budget_2", Decision: results.DecisionDeny, Reason: "that will do", By: "lead"}))

	res := e.result(run)
	require.Equal(t, workflows.StatusBudgetExhausted, res.Status)
	require.Contains(t, res.Error, "3 of 3 tool calls; that will do")
	require.Len(t, toolTexts(res.Messages), 3, "every call is answered")
	e.record(run)
}

// What counts against a budget survives continue-as-new: a budget of 25
// tool calls asks once, at call 25, in a later run.
func TestBudgetCountsSurviveContinueAsNew(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "budget_continued")
	model := e.readSteps(30)
	e.startWorker()
	// The run continues as new from 100 events on, every 12 steps or so.
	run := e.start(workflows.Input{Prompt: "Read the notes", Model: model, Tools: []string{"read_file"}, MaxSteps: 31,
		Policy: workflows.Policy{MaxHistoryEvents: 250, Budget: workflows.Budget{ToolCalls: 25}}})
	latest := e.latest(run)
	s := e.waitCard(latest, "budget_1", results.StatePendingApproval)
	require.GreaterOrEqual(t, s.Runs, 2)
	require.Equal(t, 25, s.Budget.Spent.ToolCalls)
	_, err := respond(e.caller, latest, workflows.Response{CallID: "budget_1", Decision: results.DecisionApprove})
	require.NoError(t, err)
	res := e.result(latest)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, workflows.Budget{ToolCalls: 50}, res.Budget.Limit)
}
