package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// An approve with remember=user lets the turn's later write_file call run
// without asking; its card names the grant. The history (an AddGrant
// activity, a LookupGrants local activity) is the corpus's grant_used.
func TestGrantUsedOnALaterCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "grant_used")
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "a\n"})),
		reply("", call("w2", "write_file", map[string]string{"path": "b.md", "content": "b\n"})),
		expecting(reply("Both written."), 1, "created b.md"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write a and b", Model: model, Tools: []string{"write_file"}, User: "ann",
		Policy: workflows.Policy{Approval: map[string]string{"write_file": "always"}}})
	e.waitCard(run, "w1", results.StatePendingApproval)
	_, err := respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "bob", Remember: "user"})
	require.NoError(t, err)
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	w1 := mustCard(t, res.Cards, "w1")
	require.NotEmpty(t, w1.Decisions[0].Grant, "grant stored: %+v", w1.Decisions[0])
	w2 := mustCard(t, res.Cards, "w2")
	require.Equal(t, results.StateSucceeded, w2.State)
	require.Empty(t, w2.Decisions, "nobody was asked")
	require.Equal(t, w1.Decisions[0].Grant, w2.Approval.Grant.ID)
	require.Equal(t, "bob", w2.Approval.Grant.By)
	e.record(run)
}

// An approve with remember=session lets the same tool run unasked in a
// later turn of that session, and in no turn of another session of the
// same user.
func TestSessionGrantHoldsInItsSessionOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "session_grant")
	always := workflows.Policy{Approval: map[string]string{"write_file": "always"}}
	modelA := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "a\n"})),
		expecting(reply("Written a.md."), 1, "created a.md"),
		expecting(reply("", call("w2", "write_file", map[string]string{"path": "b.md", "content": "b\n"})), 0, "Write b.md"),
		expecting(reply("Written b.md."), 1, "created b.md"),
	)
	// e.script writes one file per test; the other session's is its own.
	other, err := json.Marshal(scripted.Script{Replies: []scripted.Reply{
		reply("", call("w1", "write_file", map[string]string{"path": "c.md", "content": "c\n"})),
		expecting(reply("Written c.md."), 1, "created c.md"),
	}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(e.scripts, "session_grant_other.json"), other, 0o600))
	modelB := "scripted:session_grant_other.json"
	e.startWorker()
	a := e.startSession(workflows.SessionInput{Turn: workflows.Input{Model: modelA, Tools: []string{"write_file"}, User: "ada", Policy: always}}).GetID()
	b := e.startSession(workflows.SessionInput{Turn: workflows.Input{Model: modelB, Tools: []string{"write_file"}, User: "ada", Policy: always}}).GetID()
	approver := e.dial("e2e-approver")

	first := e.send(a, "a1", "Write a.md")
	e.conversation(a, "turn-1 waiting for w1", func(c workflows.Conversation) bool {
		return len(c.Turns) == 1 && len(c.Turns[0].Waiting) == 1
	})
	_, err = respond(approver, e.caller.GetWorkflow(context.Background(), first.TurnID, ""),
		workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "ada", Remember: "session"})
	require.NoError(t, err)
	w1 := mustCard(t, e.turnResult(first.TurnID).Cards, "w1")
	require.NotEmpty(t, w1.Decisions[0].Grant, "grant stored: %+v", w1.Decisions[0])

	second := e.send(a, "a2", "Write b.md")
	res := e.turnResult(second.TurnID)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	w2 := mustCard(t, res.Cards, "w2")
	require.Equal(t, results.StateSucceeded, w2.State)
	require.Empty(t, w2.Decisions, "nobody was asked")
	require.Equal(t, w1.Decisions[0].Grant, w2.Approval.Grant.ID)
	require.Equal(t, "session", w2.Approval.Grant.Scope)

	// Another session of ada's: the grant does not reach it.
	inB := e.send(b, "b1", "Write c.md")
	e.conversation(b, "the other session's write waiting", func(c workflows.Conversation) bool {
		return len(c.Turns) == 1 && len(c.Turns[0].Waiting) == 1 && c.Turns[0].Waiting[0].State == results.StatePendingApproval
	})
	_, err = respond(approver, e.caller.GetWorkflow(context.Background(), inB.TurnID, ""),
		workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "ada"})
	require.NoError(t, err)
	require.Equal(t, "Written c.md.", e.turnResult(inB.TurnID).Text)
}
