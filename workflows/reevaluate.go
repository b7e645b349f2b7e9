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
)

// reevaluateVersion of the turn's change marker takes the reevaluate
// Update: an operator asks the worker's approval rules of today about
// the calls waiting for approval now. Version 12 is remembered grants,
// added beside this; the numbers were assigned up front.
const reevaluateVersion = rulesVersion + 2

// ReevaluateName is the Update that re-decides a turn's waiting calls
// under the approval rules of the worker that runs it now.
const ReevaluateName = "reevaluate"

// ReevaluateRequest asks for a re-evaluation; By names the operator, for
// the cards and the log.
type ReevaluateRequest struct {
	By string `json:"by,omitempty"`
}

// Reevaluation is what a re-evaluation did, call by call, in call order.
// Calls that were not waiting for approval (or already had an answer on
// its way) are not in it.
type Reevaluation struct {
	Calls []Reevaluated `json:"calls"`
}

// What a re-evaluation did to one call.
const (
	// ReevaluatedReleased: the rules now let the call run, and it does.
	ReevaluatedReleased = "released"
	// ReevaluatedRefused: a rule now denies the call; the model reads the
	// rule's reason.
	ReevaluatedRefused = "refused"
	// ReevaluatedChanged: the call still waits, under a different rule or
	// requirement (group, quorum, separation of duties, escalation).
	ReevaluatedChanged = "changed"
	// ReevaluatedUnchanged: the call still waits as it did.
	ReevaluatedUnchanged = "unchanged"
)

// Reevaluated is one call's re-evaluation: the decision it had (Was) and
// the one it has now (Now), each an approval's rule and action
// ("rule/action"; no rule: the tool's default), and the card as it left
// it. Dropped lists approvals given before that no longer count: the
// rule's group changed, or the approver started the turn and the rule
// now separates duties.
type Reevaluated struct {
	CallID  string       `json:"call_id"`
	Tool    string       `json:"tool"`
	Outcome string       `json:"outcome"`
	Was     string       `json:"was"`
	Now     string       `json:"now"`
	Dropped []string     `json:"dropped,omitempty"`
	Card    results.Card `json:"card"`
}

// maxReevaluateBy bounds the operator's name as it lands on cards.
const maxReevaluateBy = 256

// registerReevaluate takes the reevaluate Update on turns from
// reevaluateVersion on. Older turns reject it as an unknown Update.
func (t *turn) registerReevaluate(ctx workflow.Context) error {
	if t.v < reevaluateVersion {
		return nil
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, ReevaluateName, t.reevaluate, workflow.UpdateHandlerOptions{
		Validator: t.validateReevaluate,
	}); err != nil {
		return fmt.Errorf("register reevaluate update: %w", err)
	}
	return nil
}

func (t *turn) validateReevaluate(_ workflow.Context, r ReevaluateRequest) error {
	if t.status.Final() {
		return asUpdateFailure(notWaiting("the turn has ended (%s); nothing waits to be re-evaluated", t.status))
	}
	if !t.features.Rules {
		return asUpdateFailure(fmt.Errorf("the turn started on a worker without approval rules, so it does not use them; there is nothing to re-evaluate"))
	}
	if len(r.By) > maxReevaluateBy || strings.ContainsFunc(r.By, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		return asUpdateFailure(fmt.Errorf("by must be at most %d bytes of text without control characters", maxReevaluateBy))
	}
	return nil
}

// reevaluable are the calls a re-evaluation decides again: those waiting
// for approval by the rules or a tool's default, without an answer on
// its way. A tool's own approval request (an interrupt) is the tool's,
// and a budget wait is no tool call.
func (t *turn) reevaluable() []*call {
	var cs []*call
	for _, c := range t.calls {
		if c.card.State == results.StatePendingApproval && c.card.Interrupt == nil && c.pending == nil && !c.budget && !c.sessionBudget {
			cs = append(cs, c)
		}
	}
	return cs
}

// reevaluate is the reevaluate Update's handler. It asks the worker's
// current rules about every waiting call in one SideEffect (ruleDecisions,
// as when the calls were made), so the new decisions are recorded and a
// replay on a worker with other rules reads them from history. A call now
// allowed is released and a call now denied refused, both through the
// wait that holds them, as an answer would; a call that still needs
// approval keeps waiting, under the new rule's requirement.
func (t *turn) reevaluate(ctx workflow.Context, r ReevaluateRequest) (Reevaluation, error) {
	cs := t.reevaluable()
	out := Reevaluation{Calls: []Reevaluated{}}
	if len(cs) == 0 {
		return out, nil
	}
	ds := t.ruleDecisions(ctx, cs)
	by := r.By
	if by == "" {
		by = "an operator"
	}
	var settling []*call
	for i, c := range cs {
		res := Reevaluated{CallID: c.card.CallID, Tool: c.card.Tool, Was: decisionName(c.card.Approval)}
		state, a, reason := t.probe(c, ds[i])
		res.Now = decisionName(a)
		switch {
		case state == results.StateRefused:
			res.Outcome = ReevaluatedRefused
			c.card.Approval = a
			t.settle(ctx, c, results.DecisionDeny, reason)
			settling = append(settling, c)
		case state == results.StateRunning:
			res.Outcome = ReevaluatedReleased
			c.card.Approval = a
			t.settle(ctx, c, results.DecisionApprove, fmt.Sprintf("released when %s had the approval rules re-evaluated: %s", by, allowedBy(a)))
			settling = append(settling, c)
		default:
			old := c.card.Approval
			res.Dropped = t.rewait(c, a)
			res.Outcome = ReevaluatedUnchanged
			if !sameRequirement(res.Was, old, a) || len(res.Dropped) > 0 {
				res.Outcome = ReevaluatedChanged
			}
			if n := ruleWait(c); n != nil && len(n.Approvals) > 0 && len(n.Approvals) >= n.Quorum {
				// The approvals given already meet a lowered quorum.
				res.Outcome = ReevaluatedReleased
				t.settle(ctx, c, results.DecisionApprove, fmt.Sprintf("released when %s had the approval rules re-evaluated: rule %s needs %d approvals and has them (%s)", by, n.Rule, n.Quorum, strings.Join(n.Approvals, ", ")))
				settling = append(settling, c)
			} else if res.Outcome == ReevaluatedChanged {
				c.rewaited = true
				card := c.card
				t.emit(ctx, webhook.TypeCallWaiting, fmt.Sprintf("%s/%d/reevaluated-%d", card.CallID, c.applied+1, c.reevaluations), &card)
			}
		}
		c.reevaluations++
		out.Calls = append(out.Calls, res)
	}
	workflow.GetLogger(ctx).Info("Waiting calls re-evaluated", "by", by, "calls", len(out.Calls))
	// Answer with the cards as the new decisions leave them: released and
	// refused calls once their wait has taken the decision in.
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	if err := workflow.Await(dctx, func() bool {
		return !slices.ContainsFunc(settling, func(c *call) bool { return c.pending != nil })
	}); err != nil {
		return Reevaluation{}, err
	}
	for i, c := range cs {
		out.Calls[i].Card = c.card
	}
	t.waitsChanged(ctx)
	return out, nil
}

// probe is what the rules' decision d makes of call c by the same path a
// new call takes (applyDecision), on a copy: the state the call would
// start in, its approval, and for a refusal the reason the model reads.
func (t *turn) probe(c *call, d policy.Decision) (results.State, *results.Approval, string) {
	p := &call{spec: c.spec}
	p.card.CallID, p.card.Tool, p.card.Arguments = c.card.CallID, c.card.Tool, c.card.Arguments
	t.applyDecision(p, d)
	return p.card.State, p.card.Approval, p.card.Reason
}

// settle hands the call's wait a decision of the rules, as a response
// would: the wait applies it, records it on the card and announces it.
func (t *turn) settle(ctx workflow.Context, c *call, kind results.DecisionKind, reason string) {
	c.pending = &Response{CallID: c.card.CallID, Decision: kind, By: "tollgate", Reason: reason}
	c.pendingAt = workflow.Now(ctx)
	c.byRules = true
}

// rewait puts the new requirement a on a call that keeps waiting. The
// approvals given so far carry over while they still count: not when the
// group changed (who gave them is known, not that they are members of
// the new group), and not the turn's user's where the rule now separates
// duties. The wait's escalation is counted from when it began. It
// returns the approvals dropped.
func (t *turn) rewait(c *call, a *results.Approval) []string {
	old := c.card.Approval
	if a == nil {
		// No rule holds the call now: the tool's default or the turn's
		// policy does, which takes any approver.
		var dropped []string
		if old != nil {
			dropped = slices.Clone(old.Approvals)
		}
		c.card.Approval = nil
		return dropped
	}
	n := *a
	var dropped []string
	if old != nil && old.Action == results.ApprovalRequireApproval {
		for _, who := range old.Approvals {
			if old.Group != n.Group || (n.SeparateDuties && who == t.in.User) {
				dropped = append(dropped, who)
				continue
			}
			n.Approvals = append(n.Approvals, who)
		}
		if old.Escalated && old.EscalateGroup == n.EscalateGroup && old.EscalateAfter == n.EscalateAfter {
			n.EscalatesAt, n.Escalated = old.EscalatesAt, true
		}
	}
	if n.EscalateAfter != "" && !n.Escalated && !c.waitingSince.IsZero() {
		if after, err := time.ParseDuration(n.EscalateAfter); err == nil && after > 0 {
			at := c.waitingSince.Add(after)
			n.EscalatesAt = &at
		}
	}
	c.card.Approval = &n
	return dropped
}

// sameRequirement reports whether a waiting call's requirement is what it
// was: the same rule and action, group, quorum, duties and escalation.
func sameRequirement(was string, old, n *results.Approval) bool {
	if was != decisionName(n) {
		return false
	}
	if old == nil || n == nil {
		return old == nil && n == nil
	}
	return old.Group == n.Group && old.Quorum == n.Quorum && old.SeparateDuties == n.SeparateDuties &&
		old.EscalateAfter == n.EscalateAfter && old.EscalateGroup == n.EscalateGroup && old.Message == n.Message
}

// decisionName writes an approval as "rule/action", "default" for a call
// no rule decided.
func decisionName(a *results.Approval) string {
	if a == nil {
		return "default"
	}
	rule := a.Rule
	if rule == "" {
		rule = "(turn policy)"
	}
	return rule + "/" + a.Action
}

func allowedBy(a *results.Approval) string {
	if a == nil || a.Rule == "" {
		return "the tool's default no longer asks"
	}
	return "rule " + a.Rule + " allows it"
}
