package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/grants"
	"github.com/tollgate-dev/tollgate/results"
)

// grantsVersion of the turn's change marker remembers approvals: an
// approve may carry remember (session or user), which stores a grant in
// the user's GrantsWorkflow, and a call that would wait for approval
// runs without asking when a grant covers it (looked up in a local
// activity, so the answer is recorded and a replay never asks again).
const grantsVersion = rulesVersion + 1

// grantsHistoryLimit is the history length at which a user's grants
// workflow continues as new; a variable so tests can lower it.
var grantsHistoryLimit = 2000

// GrantsWorkflow holds one user's remembered grants (package grants):
// the add and revoke Updates change them, the invalidate Signal marks
// grants that no longer apply, and the grants Query lists them. It runs
// for as long as the user has grants, continuing as new when its history
// grows, one per user (grants.WorkflowID) however many workers there
// are.
func GrantsWorkflow(ctx workflow.Context, in grants.GrantsInput) error {
	gs := in.Grants
	changes := 0
	if err := workflow.SetQueryHandler(ctx, grants.ListQuery, func() ([]grants.Grant, error) {
		return gs, nil
	}); err != nil {
		return fmt.Errorf("register grants query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, grants.AddUpdate,
		func(_ workflow.Context, g grants.Grant) (grants.Grant, error) {
			out, err := grants.Add(gs, g)
			if err != nil {
				return grants.Grant{}, temporal.NewNonRetryableApplicationError(err.Error(), grants.ErrTypeInvalidGrant, nil)
			}
			gs = out
			changes++
			for _, s := range gs {
				if s.ID == g.ID {
					return s, nil
				}
			}
			return g, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, g grants.Grant) error {
			if g.User != in.User {
				return temporal.NewNonRetryableApplicationError(fmt.Sprintf("grant %s is of user %q; this workflow keeps the grants of %q", g.ID, g.User, in.User), grants.ErrTypeInvalidGrant, nil)
			}
			if _, err := grants.Add(gs, g); err != nil {
				return temporal.NewNonRetryableApplicationError(err.Error(), grants.ErrTypeInvalidGrant, nil)
			}
			return nil
		}}); err != nil {
		return fmt.Errorf("register add update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, grants.RevokeUpdate,
		func(_ workflow.Context, r grants.RevokeInput) (grants.Grant, error) {
			out, g, err := grants.Revoke(gs, in.User, r.ID)
			if err != nil {
				return grants.Grant{}, temporal.NewNonRetryableApplicationError(err.Error(), grants.ErrTypeNoGrant, nil)
			}
			gs = out
			changes++
			return g, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, r grants.RevokeInput) error {
			if _, _, err := grants.Revoke(gs, in.User, r.ID); err != nil {
				return temporal.NewNonRetryableApplicationError(err.Error(), grants.ErrTypeNoGrant, nil)
			}
			return nil
		}}); err != nil {
		return fmt.Errorf("register revoke update: %w", err)
	}
	ch := workflow.GetSignalChannel(ctx, grants.InvalidateSignal)
	invalidate := func(inv []grants.Invalidation) {
		gs = grants.Invalidate(gs, inv, workflow.Now(ctx))
		changes++
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var inv []grants.Invalidation
			if !ch.Receive(ctx, &inv) {
				return
			}
			invalidate(inv)
		}
	})
	grown := func() bool {
		info := workflow.GetInfo(ctx)
		return changes > 0 && (info.GetCurrentHistoryLength() >= grantsHistoryLimit || info.GetContinueAsNewSuggested())
	}
	if err := workflow.Await(ctx, grown); err != nil {
		return err
	}
	// Every accepted Update is answered and every Signal taken before the
	// grants move to the next run.
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	for {
		var inv []grants.Invalidation
		if !ch.ReceiveAsync(&inv) {
			break
		}
		invalidate(inv)
	}
	return workflow.NewContinueAsNewError(ctx, grants.WorkflowName, grants.GrantsInput{User: in.User, Grants: gs})
}

// grantRefusal says why the call's current wait may not be answered by a
// remembered grant, nor be made into one; empty when it may. A grant
// stands for one person's approval, so it never answers a wait that
// needs a group's member, several approvers or someone other than the
// turn's user, nor a tool's own question or a budget.
func grantRefusal(c *call) string {
	if c.budget || c.sessionBudget {
		return fmt.Sprintf("call %s is a budget wait, not a tool call", c.card.CallID)
	}
	if c.card.State != results.StatePendingApproval {
		return fmt.Sprintf("call %s is %s, not waiting for approval", c.card.CallID, c.card.State)
	}
	if c.card.Interrupt != nil {
		return fmt.Sprintf("call %s is the tool's own approval request; only a rule's or the tool's approval default is remembered", c.card.CallID)
	}
	a := c.card.Approval
	if a == nil || a.Action != results.ApprovalRequireApproval {
		return ""
	}
	rule := ""
	if a.Rule != "" {
		rule = " (rule " + a.Rule + ")"
	}
	switch {
	case a.Group != "":
		return fmt.Sprintf("call %s may only be approved by members of group %s%s, and a remembered grant would let one approval stand for theirs", c.card.CallID, a.Group, rule)
	case a.Quorum > 1:
		return fmt.Sprintf("call %s needs %d approvers%s, and a remembered grant would let one person stand for them", c.card.CallID, a.Quorum, rule)
	case a.SeparateDuties:
		return fmt.Sprintf("call %s separates duties%s, and a remembered grant would let the turn's user run such calls unasked", c.card.CallID, rule)
	}
	return ""
}

// checkRemember refuses a response's remember and remember_args that
// cannot be honoured, with a sentence; like every check of
// validateResponse it changes nothing. Turns before grantsVersion
// ignore both, as they always did.
func (t *turn) checkRemember(c *call, r Response) error {
	if t.v < grantsVersion || (r.Remember == "" && !r.RememberArgs) {
		return nil
	}
	if r.Remember == "" {
		return fmt.Errorf("remember_args goes with remember (session or user): it limits the grant to these arguments")
	}
	scope, err := grants.ParseScope(r.Remember)
	if err != nil {
		return err
	}
	if r.Decision != results.DecisionApprove {
		return fmt.Errorf("remember only goes with approve; a %s is not remembered", r.Decision)
	}
	if why := grantRefusal(c); why != "" {
		return fmt.Errorf("the approval cannot be remembered: %s; approve without remember", why)
	}
	if t.in.User == "" {
		return fmt.Errorf("the approval cannot be remembered: the turn has no user to remember it for; approve without remember")
	}
	if scope == grants.ScopeSession && t.grantSession == "" {
		return fmt.Errorf("the approval cannot be remembered for the session: this turn is not part of a session; use remember user, or approve without remember")
	}
	return nil
}

// setupGrants notes the session a session grant of this turn holds for:
// the session that started it. An agent another turn called has none.
func (t *turn) setupGrants(ctx workflow.Context) {
	if t.v < grantsVersion || t.in.Caller != nil {
		return
	}
	if p := workflow.GetInfo(ctx).ParentWorkflowExecution; p != nil {
		t.grantSession = p.ID
	}
}

// applyGrants lets the calls that would wait for approval, and that a
// remembered grant of the turn's user covers, run without asking. The
// lookup is a local activity, recorded; if it fails, the calls ask.
func (t *turn) applyGrants(ctx workflow.Context, cs []*call) {
	if t.v < grantsVersion || t.in.User == "" {
		return
	}
	var waiting []*call
	var in activities.LookupGrantsInput
	for _, c := range cs {
		if c.card.State != results.StatePendingApproval || grantRefusal(c) != "" {
			continue
		}
		h, err := grants.ArgsHash(c.card.Arguments)
		if err != nil {
			continue
		}
		waiting = append(waiting, c)
		in.Calls = append(in.Calls, activities.GrantedCall{Tool: c.card.Tool, ArgsHash: h})
	}
	if len(waiting) == 0 {
		return
	}
	in.User, in.Session = t.in.User, t.grantSession
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 30 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary:                "LookupGrants",
	})
	var res activities.LookupGrantsResult
	if err := workflow.ExecuteLocalActivity(lctx, activities.LookupGrantsName, in).Get(ctx, &res); err != nil || len(res.Grants) != len(waiting) {
		workflow.GetLogger(ctx).Warn("Remembered grants not looked up; the calls ask", "error", err)
		return
	}
	for i, c := range waiting {
		g := res.Grants[i]
		if g == nil {
			continue
		}
		a := &results.Approval{Action: results.ApprovalAllow, Grant: g,
			Message: fmt.Sprintf("allowed by grant %s (%s), remembered from %s's approval", g.ID, g.Scope, byOrAnonymous(g.By))}
		if prev := c.card.Approval; prev != nil {
			a.Rule = prev.Rule
		}
		c.card.Approval = a
		c.card.State = results.StateRunning
	}
}

// remember stores the grant an approve with remember asked for, before
// the call runs; the approval holds whether or not it could be stored,
// and the decision on the card says which.
func (t *turn) remember(ctx workflow.Context, c *call, r *Response) {
	if t.v < grantsVersion || r == nil || r.Remember == "" || len(c.card.Decisions) == 0 {
		return
	}
	d := &c.card.Decisions[len(c.card.Decisions)-1]
	d.Remember, d.RememberArgs = r.Remember, r.RememberArgs
	g := grants.Grant{
		ID: grants.ID(t.id, c.card.CallID), User: t.in.User, Scope: grants.Scope(r.Remember),
		Tool: c.card.Tool, By: r.By, At: d.At, Turn: t.id, Call: c.card.CallID,
	}
	if g.Scope == grants.ScopeSession {
		g.Session = t.grantSession
	}
	if r.RememberArgs {
		h, err := grants.ArgsHash(c.card.EffectiveArguments())
		if err != nil {
			d.GrantError = "the approved arguments could not be hashed, so nothing was remembered"
			return
		}
		g.ArgsHash = h
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
		Summary:             fmt.Sprintf("AddGrant %s %s", c.card.CallID, c.card.Tool),
	})
	var stored grants.Grant
	err := workflow.ExecuteActivity(actx, activities.AddGrantName, activities.AddGrantInput{Grant: g, TaskQueue: workflow.GetInfo(ctx).TaskQueueName}).Get(ctx, &stored)
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == activities.ErrTypeGrantRefused {
			d.GrantError = "nothing was remembered: " + app.Message()
		} else {
			d.GrantError = "nothing was remembered: the grants store could not be reached"
		}
		workflow.GetLogger(ctx).Warn("Grant not stored", "call_id", c.card.CallID, "error", err)
		return
	}
	d.Grant = stored.ID
}
