package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/grants"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/results"
)

func writeFingerprint(t *testing.T, h *harness) string {
	t.Helper()
	w, ok := h.reg.Get("write")
	require.True(t, ok)
	s := w.Spec()
	return grants.ToolFingerprint(s.Name, s.Description, s.Schema)
}

// An approve with remember=user stores a grant; the same tool's next
// call in the turn, and in the user's next turn, runs without asking
// and its card names the grant.
func TestRememberedGrantLetsLaterCallsRunUnasked(t *testing.T) {
	h := newHarness(t,
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		calls("", tc("w2", "write", `{"path":"b.md","content":"y"}`)),
		results.AssistantText("done"))
	var approved updateOutcome
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "ann", Remember: "user"}, &approved)
	res := h.run(t, Input{Prompt: "write", Tools: []string{"write"}, User: "alice"})

	require.NoError(t, approved.rejected)
	w1 := mustCard(t, res.Cards, "w1")
	d := w1.Decisions[0]
	require.Equal(t, "user", d.Remember)
	require.NotEmpty(t, d.Grant, "the grant's id is on the decision")
	stored, err := h.grants.List(context.Background(), "alice")
	require.NoError(t, err)
	require.Len(t, stored, 1)
	g := stored[0]
	require.Equal(t, d.Grant, g.ID)
	require.Equal(t, grants.ScopeUser, g.Scope)
	require.Equal(t, "ann", g.By)
	require.Equal(t, "write", g.Tool)
	require.Empty(t, g.ArgsHash)
	require.Equal(t, writeFingerprint(t, h), g.ToolFingerprint)

	w2 := mustCard(t, res.Cards, "w2")
	require.Equal(t, results.StateSucceeded, w2.State)
	require.Empty(t, w2.Decisions, "nobody was asked")
	require.Equal(t, results.ApprovalAllow, w2.Approval.Action)
	require.Equal(t, &results.GrantUse{ID: g.ID, Scope: "user", By: "ann", At: g.At}, w2.Approval.Grant)
	require.Contains(t, w2.Summary(), "[grant "+g.ID+", user, approved by ann]")
	require.Equal(t, []string{"write:a.md=x", "write:b.md=y"}, h.log.all())

	// The user's next turn, on another worker with the same store.
	h2 := newHarness(t, calls("", tc("w9", "write", `{"path":"c.md","content":"z"}`)), results.AssistantText("done"))
	_, err = h2.grants.Add(context.Background(), "", g)
	require.NoError(t, err)
	res2 := h2.run(t, Input{Prompt: "write", Tools: []string{"write"}, User: "alice"})
	require.Equal(t, results.StateSucceeded, res2.Cards[0].State)
	require.Equal(t, g.ID, res2.Cards[0].Approval.Grant.ID)

	// Another user's turn is asked.
	h3 := newHarness(t, calls("", tc("w9", "write", `{"path":"c.md","content":"z"}`)), results.AssistantText("done"))
	_, err = h3.grants.Add(context.Background(), "", g)
	require.NoError(t, err)
	res3 := h3.run(t, Input{Prompt: "write", Tools: []string{"write"}, User: "bob", Policy: Policy{ResponseTimeout: Duration(time.Hour)}})
	require.Equal(t, results.StateRefused, res3.Cards[0].State, "bob's call waited and timed out")
	require.Nil(t, res3.Cards[0].Approval)
}

// remember_args limits the grant to the approved arguments, in any key
// order; other arguments ask again.
func TestRememberArgsMismatchAsksAgain(t *testing.T) {
	h := newHarness(t,
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		calls("", tc("w2", "write", `{"content": "x", "path": "a.md"}`), tc("w3", "write", `{"path":"a.md","content":"other"}`)),
		results.AssistantText("done"))
	var mid State
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "ann", Remember: "user", RememberArgs: true}, nil)
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, 2*time.Minute)
	h.respond(3*time.Minute, Response{CallID: "w3", Decision: results.DecisionDeny, By: "ann", Reason: "no"}, nil)
	res := h.run(t, Input{Prompt: "write", Tools: []string{"write"}, User: "alice"})

	require.True(t, mustCard(t, res.Cards, "w1").Decisions[0].RememberArgs)
	w2 := mustCard(t, res.Cards, "w2")
	require.Equal(t, results.StateSucceeded, w2.State, "the same arguments, reordered and spaced, run")
	require.True(t, w2.Approval.Grant.Args)
	require.Equal(t, results.StatePendingApproval, mustCard(t, mid.Cards, "w3").State, "other arguments ask")
	require.Equal(t, results.StateRefused, mustCard(t, res.Cards, "w3").State)
}

// A grant made for an earlier definition of the tool does not apply:
// the call asks, and the grant is listed as invalidated.
func TestGrantForAChangedToolAsksAgainAndIsInvalidated(t *testing.T) {
	h := newHarness(t, calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)), results.AssistantText("done"))
	_, err := h.grants.Add(context.Background(), "", grants.Grant{ID: "g-old", User: "alice", Scope: grants.ScopeUser, Tool: "write",
		ToolFingerprint: grants.ToolFingerprint("write", "Write a file.", []byte(`{"type":"object"}`)), By: "ann", Turn: "t0", Call: "c0"})
	require.NoError(t, err)
	var mid State
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "ann"}, nil)
	h.run(t, Input{Prompt: "write", Tools: []string{"write"}, User: "alice"})

	require.Equal(t, results.StatePendingApproval, mustCard(t, mid.Cards, "w1").State)
	stored, err := h.grants.List(context.Background(), "alice")
	require.NoError(t, err)
	require.Len(t, stored, 1)
	require.Equal(t, "tool write changed its definition since the grant was made", stored[0].Invalidated)
}

// remember is refused, with a sentence and without losing the wait,
// where a grant could not stand for the approval.
func TestRememberRefusals(t *testing.T) {
	h := newRulesHarness(t, leadsRule,
		calls("", tc("w1", "write", `{"path":"a.md","content":"long text"}`), tc("w2", "write", `{"path":"b.md","content":"ok"}`)),
		results.AssistantText("done"))
	var quorum, unknown, onDeny, argsAlone, session, ok updateOutcome
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "bob", Groups: []string{"leads"}, Remember: "user"}, &quorum)
	h.respond(2*time.Minute, Response{CallID: "w2", Decision: results.DecisionApprove, By: "bob", Remember: "forever"}, &unknown)
	h.respond(3*time.Minute, Response{CallID: "w2", Decision: results.DecisionDeny, By: "bob", Remember: "user"}, &onDeny)
	h.respond(4*time.Minute, Response{CallID: "w2", Decision: results.DecisionApprove, By: "bob", RememberArgs: true}, &argsAlone)
	h.respond(5*time.Minute, Response{CallID: "w2", Decision: results.DecisionApprove, By: "bob", Remember: "session"}, &session)
	h.respond(6*time.Minute, Response{CallID: "w2", Decision: results.DecisionApprove, By: "bob", Remember: "user"}, &ok)
	h.respond(7*time.Minute, Response{CallID: "w1", Decision: results.DecisionDeny, By: "carol", Groups: []string{"leads"}}, nil)
	h.run(t, Input{Prompt: "write", Tools: []string{"write"}, User: "alice"})

	require.EqualError(t, quorum.rejected, "the approval cannot be remembered: call w1 may only be approved by members of group leads (rule big_write), and a remembered grant would let one approval stand for theirs; approve without remember")
	require.EqualError(t, unknown.rejected, `remember "forever" is not one of session, user`)
	require.EqualError(t, onDeny.rejected, "remember only goes with approve; a deny is not remembered")
	require.EqualError(t, argsAlone.rejected, "remember_args goes with remember (session or user): it limits the grant to these arguments")
	require.EqualError(t, session.rejected, "the approval cannot be remembered for the session: this turn is not part of a session; use remember user, or approve without remember")
	require.NoError(t, ok.rejected, "the refusals lost nothing: the wait took the next response")
	stored, err := h.grants.List(context.Background(), "alice")
	require.NoError(t, err)
	require.Len(t, stored, 1)
	require.Equal(t, "write", stored[0].Tool)
}

// A grant never answers a call a rule leaves to a group or a quorum, nor
// one a deny rule refuses.
func TestGrantDoesNotAnswerGroupWaitsOrDenies(t *testing.T) {
	rules := append([]policy.Rule{{Name: "no_env", Tools: []string{"write"}, When: `args.path.endsWith(".env")`, Action: policy.ActionDeny, Reason: "no .env"}}, leadsRule...)
	h := newRulesHarness(t, rules,
		calls("", tc("w1", "write", `{"path":"a.md","content":"long text"}`), tc("w2", "write", `{"path":".env","content":"k"}`), tc("w3", "write", `{"path":"b.md","content":"ok"}`)),
		results.AssistantText("done"))
	w, _ := h.reg.Get("write")
	s := w.Spec()
	_, err := h.grants.Add(context.Background(), "", grants.Grant{ID: "g-1", User: "alice", Scope: grants.ScopeUser, Tool: "write",
		ToolFingerprint: grants.ToolFingerprint(s.Name, s.Description, s.Schema), By: "ann", Turn: "t0", Call: "c0"})
	require.NoError(t, err)
	var mid State
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionDeny, By: "carol", Groups: []string{"leads"}}, nil)
	res := h.run(t, Input{Prompt: "write", Tools: []string{"write"}, User: "alice"})

	require.Equal(t, results.StatePendingApproval, mustCard(t, mid.Cards, "w1").State, "the quorum rule still asks")
	require.Equal(t, results.StateRefused, mustCard(t, res.Cards, "w2").State, "deny beats the grant")
	require.Equal(t, "g-1", mustCard(t, res.Cards, "w3").Approval.Grant.ID)
	require.Equal(t, results.StateSucceeded, mustCard(t, res.Cards, "w3").State)
}

func TestGrantsWorkflowAddsListsRevokesAndContinuesAsNew(t *testing.T) {
	defer func(n int) { grantsHistoryLimit = n }(grantsHistoryLimit)
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(GrantsWorkflow)
	g := grants.Grant{ID: "g-1", User: "alice", Scope: grants.ScopeUser, Tool: "write", ToolFingerprint: "fp", By: "ann", Turn: "t", Call: "c"}
	var other, missing error
	var listed []grants.Grant
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(grants.AddUpdate, "a1", &testsuite.TestUpdateCallback{OnAccept: func() {}, OnReject: func(error) {}, OnComplete: func(any, error) {}}, g)
		bad := g
		bad.User, bad.ID = "bob", "g-2"
		env.UpdateWorkflow(grants.AddUpdate, "a2", &testsuite.TestUpdateCallback{OnAccept: func() {}, OnReject: func(err error) { other = err }, OnComplete: func(any, error) {}}, bad)
		env.UpdateWorkflow(grants.RevokeUpdate, "r1", &testsuite.TestUpdateCallback{OnAccept: func() {}, OnReject: func(err error) { missing = err }, OnComplete: func(any, error) {}}, grants.RevokeInput{ID: "g-9"})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(grants.ListQuery)
		require.NoError(t, err)
		require.NoError(t, v.Get(&listed))
		env.SignalWorkflow(grants.InvalidateSignal, []grants.Invalidation{{ID: "g-1", Reason: "changed"}})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		// The next change finds the history grown (the test environment
		// reports a length of 0).
		grantsHistoryLimit = 0
	}, 3*time.Minute)
	env.ExecuteWorkflow(GrantsWorkflow, grants.GrantsInput{User: "alice"})

	require.ErrorContains(t, other, `grant g-2 is of user "bob"; this workflow keeps the grants of "alice"`)
	require.ErrorContains(t, missing, `user alice has no grant "g-9"`)
	require.Equal(t, []grants.Grant{g}, listed)
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, err, &can, "a grown history continues as new")
	var next grants.GrantsInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Len(t, next.Grants, 1, "with its grants")
	require.Equal(t, "changed", next.Grants[0].Invalidated)
}
