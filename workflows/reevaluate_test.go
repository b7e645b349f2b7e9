package workflows

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/results"
)

// swappedRules are a worker's rules that a test replaces mid-turn, as a
// redeploy with a new policy file would.
type swappedRules struct {
	mu  sync.Mutex
	set *policy.Set
}

func (s *swappedRules) Decide(c policy.Call) policy.Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set.Decide(c)
}

func (s *swappedRules) swap(t *testing.T, rules []policy.Rule) {
	set := compileTestRules(t, rules)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = set
}

func newSwappedHarness(t *testing.T, f Features, rules []policy.Rule, replies ...results.Message) (*harness, *swappedRules) {
	t.Helper()
	s := &swappedRules{set: compileTestRules(t, rules)}
	f.Rules, f.Policy = true, s
	return newHarnessWith(t, f, replies...), s
}

type reevaluateOutcome struct {
	rejected error
	got      Reevaluation
	err      error
}

func (h *harness) reevaluate(delay time.Duration, by string, got *reevaluateOutcome) {
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(ReevaluateName, "reevaluate-"+by, &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) {
				got.rejected = err
				var app *temporal.ApplicationError
				if errors.As(err, &app) {
					got.rejected = errors.New(app.Message())
				}
			},
			OnComplete: func(v any, err error) {
				got.err = err
				if r, ok := v.(Reevaluation); ok {
					got.got = r
				}
			},
		}, ReevaluateRequest{By: by})
	}, delay)
}

// Four writes wait under one rule; the operator changes the rules and
// re-evaluates: the draft is released and runs, the .env write is refused
// with the new rule's reason, the write whose rule's group changed keeps
// waiting without the approval given for the old group, and the write
// whose quorum fell to the one approval it has is released.
func TestReevaluateReleasesRefusesAndKeepsWaiting(t *testing.T) {
	everyWrite := []policy.Rule{{Name: "two_leads", Tools: []string{"write"}, Action: policy.ActionRequireApproval,
		Reason: "writes need two leads", Group: "leads", Quorum: 2}}
	h, rules := newSwappedHarness(t, Features{}, everyWrite,
		calls("",
			tc("w1", "write", `{"path":"drafts/a.md","content":"x"}`),
			tc("w2", "write", `{"path":"prod.env","content":"k"}`),
			tc("w3", "write", `{"path":"main.go","content":"y"}`),
			tc("w4", "write", `{"path":"notes.md","content":"z"}`)),
		results.AssistantText("done"))
	h.respond(time.Minute, Response{CallID: "w3", Decision: results.DecisionApprove, By: "bob", Groups: []string{"leads"}}, nil)
	h.respond(time.Minute, Response{CallID: "w4", Decision: results.DecisionApprove, By: "bob", Groups: []string{"leads"}}, nil)
	h.env.RegisterDelayedCallback(func() {
		rules.swap(t, []policy.Rule{
			{Name: "drafts", Tools: []string{"write"}, When: `args.path.startsWith("drafts/")`, Action: policy.ActionAllow},
			{Name: "no_env", Tools: []string{"write"}, When: `args.path.endsWith(".env")`, Action: policy.ActionDeny, Reason: "never write .env files; put settings in config.yaml"},
			{Name: "code_ops", Tools: []string{"write"}, When: `args.path.endsWith(".go")`, Action: policy.ActionRequireApproval, Group: "ops", Quorum: 2},
			{Name: "one_lead", Tools: []string{"write"}, When: `!args.path.startsWith("drafts/")`, Action: policy.ActionRequireApproval, Group: "leads"},
		})
	}, 2*time.Minute)
	var re reevaluateOutcome
	var mid State
	h.reevaluate(3*time.Minute, "olga", &re)
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, 4*time.Minute)
	var outsider updateOutcome
	h.respond(5*time.Minute, Response{CallID: "w3", Decision: results.DecisionApprove, By: "bob", Groups: []string{"leads"}}, &outsider)
	h.respond(6*time.Minute, Response{CallID: "w3", Decision: results.DecisionApprove, By: "carl", Groups: []string{"ops"}}, nil)
	h.respond(7*time.Minute, Response{CallID: "w3", Decision: results.DecisionApprove, By: "dora", Groups: []string{"ops"}}, nil)
	res := h.run(t, Input{Prompt: "write", Tools: []string{"write"}, User: "alice"})

	require.NoError(t, re.rejected)
	require.NoError(t, re.err)
	byCall := map[string]Reevaluated{}
	for _, c := range re.got.Calls {
		byCall[c.CallID] = c
	}
	require.Len(t, byCall, 4)
	require.Equal(t, ReevaluatedReleased, byCall["w1"].Outcome)
	require.Equal(t, "two_leads/require_approval", byCall["w1"].Was)
	require.Equal(t, "drafts/allow", byCall["w1"].Now)
	require.NotEqual(t, results.StatePendingApproval, byCall["w1"].Card.State, "the answer shows the call released")

	require.Equal(t, ReevaluatedRefused, byCall["w2"].Outcome)
	require.Equal(t, results.StateRefused, byCall["w2"].Card.State)
	require.Equal(t, "never write .env files; put settings in config.yaml", byCall["w2"].Card.Reason)

	require.Equal(t, ReevaluatedChanged, byCall["w3"].Outcome)
	require.Equal(t, "code_ops/require_approval", byCall["w3"].Now)
	require.Equal(t, []string{"bob"}, byCall["w3"].Dropped, "bob approved for leads; the rule now asks ops")
	w3 := mustCard(t, mid.Cards, "w3")
	require.Equal(t, results.StatePendingApproval, w3.State)
	require.Equal(t, "ops", w3.Approval.Group)
	require.Empty(t, w3.Approval.Approvals)
	require.EqualError(t, outsider.rejected, "call w3 may only be answered by members of group ops (rule code_ops); bob is not one")

	require.Equal(t, ReevaluatedReleased, byCall["w4"].Outcome, "bob's approval meets one_lead's quorum of one")

	// The model reads the refusal; the released calls ran, w3 once ops
	// approved it twice.
	require.Equal(t, []string{"write:drafts/a.md=x", "write:notes.md=z", "write:main.go=y"}, h.log.all())
	w1 := mustCard(t, res.Cards, "w1")
	require.Equal(t, results.StateSucceeded, w1.State)
	require.Equal(t, "drafts", w1.Approval.Rule)
	require.Len(t, w1.Decisions, 1)
	require.Equal(t, "tollgate", w1.Decisions[0].By)
	require.Equal(t, "released when olga had the approval rules re-evaluated: rule drafts allows it", w1.Decisions[0].Reason)
	require.Contains(t, toolTexts(h.model.last())[1], "never write .env files")
	require.Equal(t, []string{"carl", "dora"}, mustCard(t, res.Cards, "w3").Approval.Approvals)
}

// A call that still waits under the same rule is left as it was, with the
// approvals it has, and the answer says so.
func TestReevaluateLeavesAnUnchangedWait(t *testing.T) {
	h, _ := newSwappedHarness(t, Features{}, leadsRule,
		calls("", tc("w1", "write", `{"path":"a.md","content":"long text"}`)),
		results.AssistantText("written"))
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "bob", Groups: []string{"leads"}}, nil)
	var re reevaluateOutcome
	h.reevaluate(2*time.Minute, "olga", &re)
	h.respond(3*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "carol", Groups: []string{"leads"}}, nil)
	res := h.run(t, Input{Prompt: "write", Tools: []string{"write"}, User: "alice"})

	require.NoError(t, re.err)
	require.Len(t, re.got.Calls, 1)
	require.Equal(t, ReevaluatedUnchanged, re.got.Calls[0].Outcome)
	require.Equal(t, []string{"bob"}, re.got.Calls[0].Card.Approval.Approvals)
	require.Equal(t, results.StateSucceeded, res.Cards[0].State)
	require.Equal(t, []string{"bob", "carol"}, res.Cards[0].Approval.Approvals)
}

// A rule that now escalates counts its delay from when the wait began,
// not from the re-evaluation.
func TestReevaluateEscalatesFromTheStartOfTheWait(t *testing.T) {
	h, rules := newSwappedHarness(t, Features{}, []policy.Rule{{Name: "writes", Tools: []string{"write"}, Action: policy.ActionRequireApproval, Group: "leads"}},
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		results.AssistantText("written"))
	h.env.RegisterDelayedCallback(func() { rules.swap(t, escalatingRule) }, 10*time.Minute)
	var re reevaluateOutcome
	var before, after State
	h.reevaluate(20*time.Minute, "olga", &re)
	h.env.RegisterDelayedCallback(func() { before = h.state(t) }, 59*time.Minute)
	h.env.RegisterDelayedCallback(func() { after = h.state(t) }, 61*time.Minute)
	h.respond(90*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "mona", Groups: []string{"managers"}}, nil)
	res := h.run(t, Input{Prompt: "write", Tools: []string{"write"}})

	require.NoError(t, re.err)
	require.Equal(t, ReevaluatedChanged, re.got.Calls[0].Outcome)
	require.False(t, mustCard(t, before.Cards, "w1").Approval.Escalated)
	a := mustCard(t, after.Cards, "w1").Approval
	require.True(t, a.Escalated)
	require.Equal(t, time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), a.EscalatesAt.UTC())
	require.Equal(t, results.StateSucceeded, res.Cards[0].State)
}

// A turn that started on a worker without rules does not use them, and
// says so rather than re-evaluate.
func TestReevaluateNeedsATurnWithRules(t *testing.T) {
	h := newHarness(t, calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)), results.AssistantText("written"))
	var re reevaluateOutcome
	h.reevaluate(time.Minute, "olga", &re)
	h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "bob"}, nil)
	h.run(t, Input{Prompt: "write", Tools: []string{"write"}})
	require.EqualError(t, re.rejected, "the turn started on a worker without approval rules, so it does not use them; there is nothing to re-evaluate")
}

// An escalation fires at its delay on the suite's clock: not a second
// before, and at the delay itself.
func TestEscalationFiresExactlyAfterItsDelay(t *testing.T) {
	h := newRulesHarness(t, escalatingRule,
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		results.AssistantText("written"))
	var justBefore, at State
	h.env.RegisterDelayedCallback(func() { justBefore = h.state(t) }, time.Hour-time.Second)
	h.env.RegisterDelayedCallback(func() { at = h.state(t) }, time.Hour+time.Millisecond)
	h.respond(2*time.Hour, Response{CallID: "w1", Decision: results.DecisionApprove, By: "mona", Groups: []string{"managers"}}, nil)
	h.run(t, Input{Prompt: "write", Tools: []string{"write"}})

	require.False(t, mustCard(t, justBefore.Cards, "w1").Approval.Escalated, "59:59 into the wait")
	require.True(t, mustCard(t, at.Cards, "w1").Approval.Escalated, "at one hour")
}
