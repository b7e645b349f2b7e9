package workflows

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/tool"
)

// newRulesHarness runs turns on a worker with approval rules, compiled
// against the test tools as NewPlugin compiles them.
func newRulesHarness(t *testing.T, rules []policy.Rule, replies ...results.Message) *harness {
	t.Helper()
	return newRulesHarnessWith(t, Features{}, rules, replies...)
}

func newRulesHarnessWith(t *testing.T, f Features, rules []policy.Rule, replies ...results.Message) *harness {
	t.Helper()
	f.Rules, f.Policy = true, compileTestRules(t, rules)
	return newHarnessWith(t, f, replies...)
}

// compileTestRules compiles rules against the test tools' schemas.
func compileTestRules(t *testing.T, rules []policy.Rule) *policy.Set {
	t.Helper()
	reg, err := tool.NewRegistry(testTools(t, &toolLog{}, nil)...)
	require.NoError(t, err)
	var tools []policy.Tool
	for _, s := range reg.Specs() {
		tools = append(tools, policy.Tool{Name: s.Name, Schema: s.Schema, Approval: string(s.Approval), Workspace: s.Workspace})
	}
	set, err := policy.Compile(rules, tools)
	require.NoError(t, err)
	return set
}

var draftsRules = []policy.Rule{
	{Name: "drafts", Tools: []string{"write"}, When: `args.path.startsWith("drafts/")`, Action: policy.ActionAllow},
	{Name: "no_env", Tools: []string{"write"}, When: `args.path.endsWith(".env")`, Action: policy.ActionDeny, Reason: "never write .env files; put settings in config.yaml"},
}

func TestRulesAllowDenyAndKeepTheToolsDefault(t *testing.T) {
	h := newRulesHarness(t, draftsRules,
		calls("",
			tc("w1", "write", `{"path":"drafts/a.md","content":"x"}`),
			tc("w2", "write", `{"path":"drafts/.env","content":"k"}`),
			tc("w3", "write", `{"path":"main.go","content":"y"}`)),
		results.AssistantText("done"))
	var mid State
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "w3", Decision: results.DecisionApprove, By: "alice"}, nil)
	res := h.run(t, Input{Prompt: "write", Tools: []string{"write"}})

	require.Equal(t, results.StateSucceeded, mustCard(t, mid.Cards, "w1").State, "drafts/ runs without asking")
	require.Equal(t, &results.Approval{Rule: "drafts", Action: results.ApprovalAllow}, mustCard(t, mid.Cards, "w1").Approval)
	w2 := mustCard(t, res.Cards, "w2")
	require.Equal(t, results.StateRefused, w2.State, "deny beats the allow that also matched")
	require.Equal(t, "never write .env files; put settings in config.yaml", w2.Reason)
	require.Equal(t, "no_env", w2.Approval.Rule)
	require.Equal(t, results.StatePendingApproval, mustCard(t, mid.Cards, "w3").State, "no rule matched: write's default asks")
	require.Nil(t, mustCard(t, mid.Cards, "w3").Approval)
	require.Equal(t, results.StateSucceeded, mustCard(t, res.Cards, "w3").State)
	require.Contains(t, toolTexts(h.model.last())[1], "never write .env files")
}

func TestTheTurnMayRaiseARulesAllowButNotLowerARequirement(t *testing.T) {
	rules := append([]policy.Rule{{Name: "echo_asks", Tools: []string{"echo"}, Action: policy.ActionRequireApproval, Reason: "echo is watched"}}, draftsRules...)
	h := newRulesHarness(t, rules,
		calls("", tc("w1", "write", `{"path":"drafts/a.md","content":"x"}`), tc("e1", "echo", `{"text":"hi"}`)),
		results.AssistantText("done"))
	var mid State
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice"}, nil)
	h.respond(3*time.Minute, Response{CallID: "e1", Decision: results.DecisionApprove, By: "alice"}, nil)
	h.run(t, Input{Prompt: "go", Tools: []string{"write", "echo"}, Policy: Policy{Approval: map[string]string{"write": "always", "echo": "never"}}})

	w1 := mustCard(t, mid.Cards, "w1")
	require.Equal(t, results.StatePendingApproval, w1.State, "the turn's always raises the rule's allow")
	require.Contains(t, w1.Approval.Message, "the turn's policy.approval asks before write runs (rule drafts alone would allow it)")
	e1 := mustCard(t, mid.Cards, "e1")
	require.Equal(t, results.StatePendingApproval, e1.State, "the turn's never does not lower a rule's require_approval")
	require.Equal(t, "echo is watched", e1.Approval.Message)
}

var leadsRule = []policy.Rule{{
	Name: "big_write", Tools: []string{"write"}, When: `size(args.content) > 3`, Action: policy.ActionRequireApproval,
	Reason: "long writes need two leads", Group: "leads", Quorum: 2, SeparateDuties: true,
}}

func TestQuorumNeedsDistinctMembersAndOneDenyRefuses(t *testing.T) {
	h := newRulesHarness(t, leadsRule,
		calls("", tc("w1", "write", `{"path":"a.md","content":"long text"}`)),
		results.AssistantText("not written"))
	var first, again, outsider, starter, anonymous, edited, deny updateOutcome
	var mid State
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "bob", Groups: []string{"leads"}}, &first)
	h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "bob", Groups: []string{"leads"}}, &again)
	h.respond(3*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "eve", Groups: []string{"sales"}}, &outsider)
	h.respond(4*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice", Groups: []string{"leads"}}, &starter)
	h.respond(5*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, Groups: []string{"leads"}}, &anonymous)
	h.respond(5*time.Minute+30*time.Second, Response{CallID: "w1", Decision: results.DecisionApprove, By: "dan", Groups: []string{"leads"}, Arguments: []byte(`{"path":"b.md","content":"other"}`)}, &edited)
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, 6*time.Minute)
	h.respond(7*time.Minute, Response{CallID: "w1", Decision: results.DecisionDeny, By: "carol", Groups: []string{"leads"}, Reason: "too long"}, &deny)
	res := h.run(t, Input{Prompt: "write", Tools: []string{"write"}, User: "alice"})

	require.NoError(t, first.rejected)
	require.Equal(t, results.StatePendingApproval, first.card.State, "one approval of two: still waiting")
	require.Equal(t, []string{"bob"}, first.card.Approval.Approvals)
	require.EqualError(t, again.rejected, "bob has already approved call w1; it needs 2 different approvers (so far: bob)")
	require.EqualError(t, outsider.rejected, "call w1 may only be answered by members of group leads (rule big_write); eve is not one")
	require.EqualError(t, starter.rejected, "call w1 separates duties (rule big_write): alice started this turn and may not approve its calls")
	require.EqualError(t, anonymous.rejected, "call w1 needs a named approver (rule big_write); send by with who you are")
	require.EqualError(t, edited.rejected, "call w1 needs 2 approvers (rule big_write), who approve it as it stands; edited arguments are refused (deny it with a reason instead)")
	a := mustCard(t, mid.Cards, "w1").Approval
	require.Equal(t, &results.Approval{Rule: "big_write", Action: results.ApprovalRequireApproval, Message: "long writes need two leads",
		Group: "leads", Quorum: 2, Approvals: []string{"bob"}, SeparateDuties: true}, a)
	require.NoError(t, deny.rejected)

	require.Empty(t, h.log.all(), "one deny refuses a call half approved")
	c := res.Cards[0]
	require.Equal(t, results.StateRefused, c.State)
	require.Equal(t, "too long", c.Reason)
	require.Len(t, c.Decisions, 2)
	require.Equal(t, "carol", c.Decisions[1].By)
}

func TestQuorumOfTwoRunsTheCall(t *testing.T) {
	h := newRulesHarness(t, leadsRule,
		calls("", tc("w1", "write", `{"path":"a.md","content":"long text"}`)),
		results.AssistantText("written"))
	var second updateOutcome
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "bob", Groups: []string{"leads", "ops"}}, nil)
	h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "carol", Groups: []string{"leads"}}, &second)
	res := h.run(t, Input{Prompt: "write", Tools: []string{"write"}, User: "alice"})

	require.NoError(t, second.rejected)
	require.Equal(t, results.StateRunning, second.card.State)
	require.Equal(t, []string{"write:a.md=long text"}, h.log.all())
	c := res.Cards[0]
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, []string{"bob", "carol"}, c.Approval.Approvals)
	require.Len(t, c.Decisions, 2)
}

var escalatingRule = []policy.Rule{{
	Name: "writes", Tools: []string{"write"}, Action: policy.ActionRequireApproval, Group: "leads",
	Escalate: &policy.Escalate{After: policy.Duration(time.Hour), Group: "managers"},
}}

func TestEscalationWidensTheGroupAfterItsTime(t *testing.T) {
	h := newRulesHarness(t, escalatingRule,
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		results.AssistantText("written"))
	var early, late updateOutcome
	var before, after State
	h.respond(30*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "mona", Groups: []string{"managers"}}, &early)
	h.env.RegisterDelayedCallback(func() { before = h.state(t) }, 59*time.Minute)
	h.env.RegisterDelayedCallback(func() { after = h.state(t) }, 61*time.Minute)
	h.respond(90*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "mona", Groups: []string{"managers"}}, &late)
	res := h.run(t, Input{Prompt: "write", Tools: []string{"write"}})

	require.EqualError(t, early.rejected, "call w1 may only be answered by members of group leads (rule writes); mona is not one")
	require.False(t, mustCard(t, before.Cards, "w1").Approval.Escalated)
	a := mustCard(t, after.Cards, "w1").Approval
	require.True(t, a.Escalated)
	require.Equal(t, time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), a.EscalatesAt.UTC())
	require.NoError(t, late.rejected)
	require.Equal(t, results.StateSucceeded, res.Cards[0].State)
	require.Equal(t, time.Date(2026, 11, 30, 10, 30, 0, 0, time.UTC), res.Cards[0].Decisions[0].At.UTC())
}

func TestEscalatedWaitStillTimesOut(t *testing.T) {
	h := newRulesHarness(t, escalatingRule,
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		results.AssistantText("gave up"))
	res := h.run(t, Input{Prompt: "write", Tools: []string{"write"}, Policy: Policy{ResponseTimeout: Duration(3 * time.Hour)}})

	c := res.Cards[0]
	require.Equal(t, results.StateRefused, c.State)
	require.Equal(t, "no response within 3h", c.Reason)
	require.True(t, c.Approval.Escalated)
	require.Equal(t, time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), c.Decisions[0].At.UTC(), "the response timeout counts from the start of the wait, not the escalation")
}

// An escalation is announced to webhook receivers once, with the card
// saying who may answer now, between the wait and the decision.
func TestEscalationIsAWebhookEvent(t *testing.T) {
	h := newRulesHarnessWith(t, Features{Webhooks: true}, escalatingRule,
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		results.AssistantText("written"))
	d := withWebhooks(h)
	var started []string
	h.env.SetOnChildWorkflowStartedListener(func(info *workflow.Info, _ workflow.Context, _ converter.EncodedValues) {
		started = append(started, info.WorkflowExecution.ID)
	})
	h.respond(2*time.Hour, Response{CallID: "w1", Decision: results.DecisionApprove, By: "mona", Groups: []string{"managers"}}, nil)
	h.run(t, Input{Prompt: "write", Tools: []string{"write"}})

	// The turn starts the deliveries in the order things happened.
	run := "default-test-run-id/"
	require.Equal(t, []string{run + "call.waiting/w1/1", run + "call.escalated/w1/1", run + "call.decided/w1/1", run + "turn.ended/"}, started)
	// Each event is its own delivery workflow, so that a receiver that is
	// down holds up no other event and no turn. The decision and the
	// turn's end start in one workflow task, and their deliveries then
	// race: arrival order is unspecified (docs/gateway.md says so;
	// receivers order by at). In the suite about one run in twenty
	// delivers turn.ended first.
	var types []string
	for _, e := range d.events {
		types = append(types, e.Type)
	}
	require.Len(t, types, 4)
	require.Equal(t, []string{webhook.TypeCallWaiting, webhook.TypeCallEscalated}, types[:2])
	require.ElementsMatch(t, []string{webhook.TypeCallDecided, webhook.TypeTurnEnded}, types[2:])
	esc := d.events[1]
	require.True(t, esc.Card.Approval.Escalated)
	require.Equal(t, "managers", esc.Card.Approval.EscalateGroup)
	require.Equal(t, time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), esc.At.UTC())
}

type collected struct {
	mu     sync.Mutex
	events []stream.Event
}

func (c *collected) Publish(e stream.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}

// Live watchers see the escalation as a card event, at the time it
// happened, and each approval of a quorum as one.
func TestEscalationAndApprovalsAreLiveCardEvents(t *testing.T) {
	live := &collected{}
	rule := escalatingRule[0]
	rule.Quorum = 2
	h := newRulesHarnessWith(t, Features{Events: live}, []policy.Rule{rule},
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		results.AssistantText("written"))
	h.respond(30*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "lena", Groups: []string{"leads"}}, nil)
	h.respond(2*time.Hour, Response{CallID: "w1", Decision: results.DecisionApprove, By: "mona", Groups: []string{"managers"}}, nil)
	h.run(t, Input{Prompt: "write", Tools: []string{"write"}})

	var seen []string
	for _, e := range live.events {
		if e.Type != stream.TypeCard || e.Card.CallID != "w1" || e.Card.Approval == nil {
			continue
		}
		a := e.Card.Approval
		seen = append(seen, fmt.Sprintf("%s %s approvals=%v escalated=%v", e.Time.Format("15:04"), e.Card.State, a.Approvals, a.Escalated))
	}
	require.Equal(t, []string{
		"09:00 pending_approval approvals=[] escalated=false",
		"09:30 pending_approval approvals=[lena] escalated=false",
		"10:00 pending_approval approvals=[lena] escalated=true",
		"11:00 running approvals=[lena mona] escalated=true",
		"11:00 succeeded approvals=[lena mona] escalated=true",
	}, seen)
}
