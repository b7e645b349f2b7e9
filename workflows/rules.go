package workflows

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// decide sets the first state of calls that may run: running, waiting
// for approval, or refused. From rulesVersion, on a deployment with
// approval rules, the rules decide, all of a step's calls in one
// SideEffect: the decisions are recorded in history with the rule that
// made each, so a replay never asks the rules again and a changed rule
// only affects calls made after the change. The turn's own policy may
// then make a call stricter, never looser.
func (t *turn) decide(ctx workflow.Context, cs []*call) {
	var ds []policy.Decision
	if len(cs) > 0 && t.v >= rulesVersion && t.features.Rules {
		ds = t.ruleDecisions(ctx, cs)
	}
	for i, c := range cs {
		var d policy.Decision
		if i < len(ds) {
			d = ds[i]
		}
		t.applyDecision(c, d)
	}
	t.applyGrants(ctx, cs)
}

// ruleDecisions asks the worker's rules about calls, in a SideEffect.
func (t *turn) ruleDecisions(ctx workflow.Context, cs []*call) []policy.Decision {
	in := make([]policy.Call, len(cs))
	for i, c := range cs {
		in[i] = policy.Call{Tool: c.card.Tool, Args: c.card.Arguments, User: t.in.User, Model: t.in.Model, Step: t.step,
			Agent: t.agentName(), Metadata: t.in.Metadata}
	}
	rules := t.live.Policy
	var out []policy.Decision
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		ds := make([]policy.Decision, len(in))
		if rules == nil {
			// A worker redeployed without rules: the tools' defaults hold.
			return ds
		}
		for i, c := range in {
			ds[i] = rules.Decide(c)
		}
		return ds
	}).Get(&out)
	if err != nil || len(out) != len(cs) {
		// A recorded value this code cannot read is not its own; asking
		// a person is the one safe answer.
		workflow.GetLogger(ctx).Warn("Recorded approval decisions unreadable; every call of the step asks", "error", err)
		out = make([]policy.Decision, len(cs))
		for i := range out {
			out[i] = policy.Decision{Action: policy.ActionRequireApproval, Reason: "the recorded approval decision could not be read, so a person decides", Quorum: 1}
		}
	}
	return out
}

// applyDecision sets a call's first state from the rules' decision and
// the turn's policy. Precedence: a deny refuses; otherwise the call asks
// if the rules, the tool's default (when no rule matched) or the turn's
// policy.approval says so. A rule's allow overrides the tool's default,
// both being the worker's; the turn can only raise.
func (t *turn) applyDecision(c *call, d policy.Decision) {
	raised := t.in.Policy.raises(c.spec.Name)
	switch d.Action {
	case policy.ActionDeny:
		c.card.Approval = &results.Approval{Rule: d.Rule, Action: results.ApprovalDeny, Message: d.Reason}
		c.refuse(d.Reason)
	case policy.ActionRequireApproval:
		a := &results.Approval{Rule: d.Rule, Action: results.ApprovalRequireApproval, Message: d.Reason,
			Group: d.Group, Quorum: max(d.Quorum, 1), SeparateDuties: d.SeparateDuties}
		if e := d.Escalate; e != nil {
			a.EscalateAfter, a.EscalateGroup = time.Duration(e.After).String(), e.Group
		}
		c.card.Approval = a
		c.card.State = results.StatePendingApproval
	case policy.ActionAllow:
		if raised {
			c.card.Approval = &results.Approval{Rule: d.Rule, Action: results.ApprovalRequireApproval, Quorum: 1,
				Message: fmt.Sprintf("the turn's policy.approval asks before %s runs (rule %s alone would allow it)", c.spec.Name, d.Rule)}
			c.card.State = results.StatePendingApproval
			return
		}
		c.card.Approval = &results.Approval{Rule: d.Rule, Action: results.ApprovalAllow, Message: d.Reason}
		c.card.State = results.StateRunning
	default:
		if t.in.Policy.needsApproval(c.spec) {
			c.card.State = results.StatePendingApproval
		} else {
			c.card.State = results.StateRunning
		}
	}
}

// raises reports whether the turn's policy.approval asks for the tool.
func (p Policy) raises(name string) bool {
	if a, ok := p.Approval[name]; ok {
		return a == string(tool.ApprovalAlways)
	}
	return p.Approval["*"] == string(tool.ApprovalAlways)
}

// ruleWait is the rule's requirement for the call's current wait: set
// while a call a rule sent for approval waits for it (a tool's own
// approval request, which carries an interrupt, is not the rule's).
func ruleWait(c *call) *results.Approval {
	a := c.card.Approval
	if a == nil || a.Action != results.ApprovalRequireApproval || c.card.State != results.StatePendingApproval || c.card.Interrupt != nil {
		return nil
	}
	return a
}

// checkApprover refuses an approve or deny the rule's wait does not take
// from this responder: not a member of the group, the turn's own user
// where duties are separated, or someone who has approved already.
// Identity and groups are as the sender says; see docs/security.md.
func (t *turn) checkApprover(c *call, a *results.Approval, r Response) error {
	rule := ""
	if a.Rule != "" {
		rule = " (rule " + a.Rule + ")"
	}
	named := a.Group != "" || a.Quorum > 1 || a.SeparateDuties
	if named && strings.TrimSpace(r.By) == "" {
		return fmt.Errorf("call %s needs a named approver%s; send by with who you are", c.card.CallID, rule)
	}
	if a.Group != "" {
		groups := []string{a.Group}
		if a.Escalated && a.EscalateGroup != "" && a.EscalateGroup != a.Group {
			groups = append(groups, a.EscalateGroup)
		}
		if !slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(r.Groups, g) }) {
			return fmt.Errorf("call %s may only be answered by members of group %s%s; %s is not one", c.card.CallID, strings.Join(groups, " or "), rule, r.By)
		}
	}
	if r.Decision != results.DecisionApprove {
		return nil
	}
	if a.SeparateDuties && t.in.User != "" && r.By == t.in.User {
		return fmt.Errorf("call %s separates duties%s: %s started this turn and may not approve its calls", c.card.CallID, rule, r.By)
	}
	if a.Quorum > 1 && len(r.Arguments) > 0 {
		// Each approver must approve the same call.
		return fmt.Errorf("call %s needs %d approvers%s, who approve it as it stands; edited arguments are refused (deny it with a reason instead)", c.card.CallID, a.Quorum, rule)
	}
	if slices.Contains(a.Approvals, r.By) {
		return fmt.Errorf("%s has already approved call %s; it needs %d different approvers (so far: %s)", r.By, c.card.CallID, a.Quorum, strings.Join(a.Approvals, ", "))
	}
	return nil
}

// partialApproval reports whether the pending response is an approve
// that does not yet complete the rule's quorum.
func partialApproval(c *call) bool {
	a := ruleWait(c)
	return a != nil && c.pending != nil && !c.byRules && c.pending.Decision == results.DecisionApprove && len(a.Approvals)+1 < a.Quorum
}

// changeApproval gives the card an approval of its own to change: copies
// of the card already handed out (webhook events, live events, Update
// results) keep the one they were made with.
func (c *call) changeApproval() *results.Approval {
	a := *c.card.Approval
	a.Approvals = slices.Clone(a.Approvals)
	c.card.Approval = &a
	return &a
}

// approveOne records one approval of a quorum; the call keeps waiting
// for the others.
func (c *call) approveOne() {
	r := *c.pending
	c.pending = nil
	c.card.Decisions = append(c.card.Decisions, results.Decision{Decision: r.Decision, By: r.By, At: c.pendingAt, Reason: r.Reason})
	a := c.changeApproval()
	a.Approvals = append(a.Approvals, r.By)
}

// completeApproval adds the last approver of a quorum to the list.
func (c *call) completeApproval() {
	if a := ruleWait(c); a != nil && c.pending != nil && !c.byRules && c.pending.Decision == results.DecisionApprove && c.pending.By != "" {
		a = c.changeApproval()
		a.Approvals = append(a.Approvals, c.pending.By)
	}
}

// startEscalation sets when a rule's wait escalates, as it begins.
func startEscalation(c *call, since time.Time) {
	a := ruleWait(c)
	if a == nil || a.EscalateAfter == "" || a.EscalatesAt != nil {
		return
	}
	after, err := time.ParseDuration(a.EscalateAfter)
	if err != nil || after <= 0 {
		return
	}
	at := since.Add(after)
	c.changeApproval().EscalatesAt = &at
}

// escalation is when the call's wait escalates, if it has yet to.
func escalation(c *call) (time.Time, bool) {
	a := ruleWait(c)
	if a == nil || a.EscalatesAt == nil || a.Escalated {
		return time.Time{}, false
	}
	return *a.EscalatesAt, true
}

// escalate marks the wait escalated and announces it.
func (t *turn) escalate(ctx workflow.Context, c *call) {
	c.changeApproval().Escalated = true
	card := c.card
	t.emit(ctx, webhook.TypeCallEscalated, fmt.Sprintf("%s/%d", card.CallID, c.applied+1), &card)
}
