package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// A session's budget counts across its turns: the second turn meets it
// before its first model call, a person raises it, and the session goes
// on under the raised budget. Both histories go to the corpus.
func TestSessionBudgetAsksAcrossTurns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "session_budget")
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte("notes"), 0o600))
	model := e.script(
		reply("", call("r1", "read_file", map[string]string{"path": "notes.txt"})), reply("Done."),
		reply("", call("r2", "read_file", map[string]string{"path": "notes.txt"})), reply("Done again."),
	)
	e.startWorker()
	run := e.startSession(workflows.SessionInput{Turn: workflows.Input{Model: model, Tools: []string{"read_file"}},
		Budget: workflows.Budget{ModelCalls: 2}})
	id := run.GetID()
	first := e.send(id, "u1", "Read the notes")
	require.Equal(t, workflows.StatusCompleted, e.turnResult(first.TurnID).Status)

	second := e.send(id, "u2", "Read them again")
	turn := e.caller.GetWorkflow(context.Background(), second.TurnID, "")
	s := e.waitCard(turn, "budget_1", results.StatePendingApproval)
	wait := mustCard(t, s.Cards, "budget_1")
	require.Contains(t, wait.Interrupt.Prompt, "the session reached its budget: 2 of 2 model calls")
	require.Equal(t, 2, s.SessionBudget.Spent.ModelCalls)
	_, err := respond(e.caller, turn, workflows.Response{CallID: "budget_1", Decision: results.DecisionApprove, Arguments: []byte(`{"model_calls":4}`), By: "lead"})
	require.NoError(t, err)
	res := e.turnResult(second.TurnID)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Done again.", res.Text)
	require.Equal(t, workflows.Budget{ModelCalls: 4}, res.SessionBudget.Limit)

	done := e.end(id, workflows.End{By: "ada"})
	require.Equal(t, workflows.Budget{ModelCalls: 4}, done.Budget.Limit)
	require.Equal(t, 2, done.Spent.ToolCalls)
	require.Equal(t, 4, done.Spent.ModelCalls)
	require.Positive(t, done.Turns[1].Tokens)
	e.recordTo(sessionCorpusDir, "session_budget", id, run.GetRunID())
	e.recordTo(corpusDir, "session_budget_turn", second.TurnID, "")
}
