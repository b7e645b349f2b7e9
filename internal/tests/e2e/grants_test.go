package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

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
