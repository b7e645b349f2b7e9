package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// call is one tool call's lifecycle inside the workflow.
type call struct {
	card results.Card
	spec tool.Spec
	// resume is the person's answer the next run carries.
	resume *tool.Resume
	// pending is an accepted response its call has not applied yet.
	pending   *Response
	pendingAt time.Time
	// applied counts applied responses, so an update handler knows when
	// its own has taken effect.
	applied int
	// queued is set while a non-concurrent call waits for its turn.
	queued bool
	// runs counts the call's RunTool activities; it names each one.
	runs int
	// waitingSince is when the current wait began; waiting is set while
	// the call is parked on it, previewing while its preview runs.
	// resumed marks a wait a run took over from the run before: it was
	// announced and previewed there already.
	waitingSince time.Time
	waiting      bool
	previewing   bool
	resumed      bool
	// handed marks a call of a step the run before handed on.
	handed bool
	// budget marks a turn's budget wait, which is no tool call;
	// sessionBudget one for the session's budget.
	budget        bool
	sessionBudget bool
	// byRules marks a pending response that is the rules' own, from a
	// re-evaluation (reevaluate.go): no approver of a quorum. rewaited
	// wakes the wait to take up a requirement a re-evaluation changed;
	// reevaluations counts the call's re-evaluations.
	byRules       bool
	rewaited      bool
	reevaluations int
}

// startCalls makes a card for each call of one step. Calls that cannot run
// (unknown tool, arguments that are not JSON or do not fit the schema) fail
// at once, before anyone is asked to approve them.
func (t *turn) startCalls(ctx workflow.Context, toolCalls []results.ToolCall) []*call {
	step := make([]*call, 0, len(toolCalls))
	// undecided are the calls that may run: the approval rules decide
	// them together, once the step's cards are made.
	var undecided []*call
	maxCalls := len(toolCalls)
	if t.hardened() {
		maxCalls = t.in.Policy.maxCallsPerStep()
	}
	for i, tc := range toolCalls {
		c := &call{}
		c.card.CallID = t.uniqueCallID(tc.ID, i)
		if c.card.CallID != tc.ID {
			// The tool message still answers the model's own id.
			c.card.ModelCallID = tc.ID
		}
		c.card.Tool = tc.Name
		if tc.Name == "" {
			c.card.Tool = "(unnamed)"
		}
		args := json.RawMessage(tc.Arguments)
		if strings.TrimSpace(tc.Arguments) == "" {
			args = json.RawMessage(`{}`)
		}
		spec, known := t.specs[tc.Name]
		c.spec = spec
		switch {
		case i >= maxCalls:
			c.card.Arguments = keepForPeople(args)
			c.fail(results.FailureToolError, fmt.Sprintf("this reply made %d tool calls and a step runs at most %d (policy.max_calls_per_step), so this call did not run; make fewer calls at once", len(toolCalls), maxCalls), "", "")
		case t.hardened() && len(args) > maxArgumentBytes:
			c.card.Arguments = keepForPeople(args)
			c.fail(results.FailureToolError, fmt.Sprintf("the arguments are %d bytes and a call's arguments may be at most %d, so this call did not run", len(args), maxArgumentBytes), "", "")
		case !json.Valid(args):
			// Keep what the model sent, as a JSON string, for people to see.
			quoted, _ := json.Marshal(tc.Arguments)
			c.card.Arguments = quoted
			c.fail(results.FailureToolError, "the arguments are not valid JSON; send a JSON object matching the tool's schema", "", "")
		case !known:
			c.card.Arguments = results.CompactJSON(args)
			c.fail(results.FailureToolError, fmt.Sprintf("unknown tool %q; available tools: %s", tc.Name, strings.Join(t.in.Tools, ", ")), "", "")
		default:
			c.card.Arguments = results.CompactJSON(args)
			if err := t.schemas[tc.Name].Validate(args); err != nil {
				c.fail(results.FailureToolError, fmt.Sprintf("invalid arguments for %s: %v", tc.Name, err), "", "")
			} else {
				undecided = append(undecided, c)
			}
		}
		t.calls = append(t.calls, c)
		t.byID[c.card.CallID] = c
		step = append(step, c)
		t.toolCalls++
	}
	t.decide(ctx, undecided)
	return step
}

// uniqueCallID keeps call ids unique across the turn: some models reuse
// ids such as "call_0" every step, and respond must name one call.
func (t *turn) uniqueCallID(id string, i int) string {
	if id == "" || (t.hardened() && !plainCallID(id)) {
		id = fmt.Sprintf("call_%d_%d", t.step, i+1)
	}
	if t.free(id) {
		return id
	}
	// Suffixes are only ever taken, so the search resumes where the last
	// one for this id stopped: the same ids as trying from 2, without the
	// quadratic rescan.
	n := max(t.nextSuffix[id], 2)
	for ; ; n++ {
		if alt := fmt.Sprintf("%s_%d", id, n); t.free(alt) {
			t.nextSuffix[id] = n + 1
			return alt
		}
	}
}

// free reports whether no call of the turn, in this run or an earlier
// one, has the id.
func (t *turn) free(id string) bool {
	return t.find(id) == nil && !t.earlierIDs.has(id)
}

// plainCallID accepts the ids providers generate; anything else (huge,
// control characters, slashes) is replaced, since people type call ids
// and they name the call's activities.
func plainCallID(id string) bool {
	if len(id) > maxCallIDBytes {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' || r == ':') {
			return false
		}
	}
	return true
}

// keepForPeople records arguments that will not run: valid JSON as it is
// up to a bound, anything else as a JSON string cut to that bound.
func keepForPeople(args json.RawMessage) json.RawMessage {
	const keep = 4 << 10
	if len(args) <= keep && json.Valid(args) {
		return results.CompactJSON(args)
	}
	text, _ := results.Truncate(string(args), results.Limits{MaxBytes: keep})
	quoted, _ := json.Marshal(text)
	return quoted
}

// runStep drives every call of a step to a final state. Each call runs in
// its own coroutine, so waits and runs overlap; the step ends when all are
// final, even if the turn was cancelled meanwhile. It returns true,
// instead, when the step is parked on people and the run has grown: the
// turn then continues as new with the step as it stands.
func (t *turn) runStep(ctx workflow.Context, step []*call) (handOn bool) {
	done, driven := 0, 0
	for _, c := range step {
		if c.handed && c.card.State.Final() {
			// Ended in the run before.
			continue
		}
		driven++
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer func() { done++ }()
			t.drive(ctx, c)
		})
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	for {
		_ = workflow.Await(dctx, func() bool {
			return done == driven || (ctx.Err() == nil && t.parked(ctx, step) && (t.grown(ctx) || t.tailDue(ctx)))
		})
		if done == driven {
			return false
		}
		if t.tailDeferred() {
			t.storeTail(dctx)
			continue
		}
		// A Signal not read yet may answer a call; then it runs first.
		if !t.takeSignals(ctx) && t.parked(ctx, step) {
			return true
		}
	}
}

func (t *turn) drive(ctx workflow.Context, c *call) {
	for !c.card.State.Final() {
		if c.card.State.Waiting() {
			t.wait(ctx, c)
		} else {
			t.execute(ctx, c)
		}
	}
	t.countCall(ctx, c)
}

// wait parks the call until a response arrives, the response timeout
// passes, another call of the step transfers the conversation, or the
// turn is cancelled.
func (t *turn) wait(ctx workflow.Context, c *call) {
	defer t.timeWait(ctx, c)()
	timeout := t.in.Policy.responseTimeout()
	t.waitsChanged(ctx)
	left := timeout
	if c.resumed {
		c.resumed = false
		left = max(timeout-workflow.Now(ctx).Sub(c.waitingSince), 0)
	} else {
		c.waitingSince = workflow.Now(ctx)
		startEscalation(c, c.waitingSince)
		c.previewing = true
		t.preview(ctx, c)
		c.previewing = false
		t.emitWaiting(ctx, c)
	}
	c.waiting = true
	var ok bool
	var err error
	end := workflow.Now(ctx).Add(left)
	for {
		ok, err = t.awaitAnswer(ctx, c, end)
		if err == nil && ok && c.rewaited {
			c.rewaited = false
			if c.pending == nil && !t.transferred() {
				continue
			}
		}
		if err == nil && ok && partialApproval(c) {
			// One approval of a quorum: recorded, and the wait goes on.
			c.approveOne()
			c.applied++
			continue
		}
		break
	}
	c.waiting = false
	switch {
	case err != nil:
		c.record(ctx, results.Decision{Decision: results.DecisionCancel, By: "tollgate", Reason: t.interruption()})
		c.endWait(t.interruption()+" while this call waited", "")
	case c.pending == nil && t.transferred():
		// The conversation belongs to another agent now; answering this
		// call later must not run its tool.
		reason := fmt.Sprintf("the conversation was transferred to %s while this call waited", t.transfer.Target)
		c.record(ctx, results.Decision{Decision: results.DecisionCancel, By: "tollgate", Reason: reason})
		c.refuse(reason)
	case !ok:
		reason := "no response within " + formatDuration(timeout)
		c.record(ctx, results.Decision{Decision: results.DecisionTimeout, By: "tollgate", Reason: reason})
		c.endWait(reason, "")
	default:
		c.completeApproval()
		r := c.pending
		t.apply(c)
		t.remember(ctx, c, r)
		c.byRules = false
	}
	c.applied++
	t.emitDecided(ctx, c)
	t.waitsChanged(ctx)
}

// awaitAnswer waits until the call has a response or the conversation
// was transferred (true), or until end (false). A rule's wait escalates
// on the way, once, when its time comes before end.
func (t *turn) awaitAnswer(ctx workflow.Context, c *call, end time.Time) (bool, error) {
	answered := func() bool { return c.pending != nil || t.transferred() || c.rewaited }
	for {
		now := workflow.Now(ctx)
		at, pending := escalation(c)
		if !pending || !at.Before(end) {
			break
		}
		if at.After(now) {
			ok, err := workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{
				Timeout:      at.Sub(now),
				TimerOptions: workflow.TimerOptions{Summary: fmt.Sprintf("%s %s: escalates", c.card.CallID, c.card.Tool)},
			}, answered)
			if err != nil || ok {
				return ok, err
			}
		} else if answered() {
			return true, nil
		}
		t.escalate(ctx, c)
	}
	left := end.Sub(workflow.Now(ctx))
	if left <= 0 {
		return answered(), nil
	}
	return workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{
		Timeout:      left,
		TimerOptions: workflow.TimerOptions{Summary: fmt.Sprintf("%s %s: %s", c.card.CallID, c.card.Tool, c.card.State)},
	}, answered)
}

// transferred reports whether a call of the turn has handed the
// conversation to another agent; calls still waiting or queued then end
// without running.
func (t *turn) transferred() bool {
	return t.hardened() && t.transfer != nil
}

// execute runs the tool once (Temporal retries idempotent tools) and moves
// the card to what the outcome says.
func (t *turn) execute(ctx workflow.Context, c *call) {
	if !c.spec.Concurrent {
		c.setQueued(true, t.hardened())
		err := workflow.Await(ctx, func() bool { return (!t.exclusive && t.nextQueued() == c) || t.transferred() })
		c.setQueued(false, false)
		if err != nil {
			c.refuse(t.interruption() + " before this call ran")
			return
		}
		if t.transferred() {
			c.refuse(fmt.Sprintf("the conversation was transferred to %s before this call ran", t.transfer.Target))
			return
		}
		t.exclusive = true
		defer func() { t.exclusive = false }()
	}
	if ctx.Err() != nil {
		c.refuse(t.interruption() + " before this call ran")
		return
	}
	if name, ok := t.agentTools[c.card.Tool]; ok {
		t.runAgent(ctx, c, name)
		return
	}
	if target, ok := t.handoffTools[c.card.Tool]; ok {
		t.runHandoff(c, target)
		return
	}
	queue := t.queueFor(c)
	c.runs++
	in := activities.RunToolInput{
		TurnID:    t.id,
		CallID:    c.card.CallID,
		Tool:      c.card.Tool,
		Arguments: c.card.EffectiveArguments(),
		Resume:    c.resume,
		WorkDir:   t.workDir,
		User:      t.in.User, Session: t.streamSession(),
	}
	if t.long() {
		in.Execution = workflow.GetInfo(ctx).FirstRunID
	}
	var out results.Outcome
	ran, err := false, error(nil)
	if t.fast() && c.spec.RunsLocally() {
		out, ran, err = t.runLocal(ctx, c, queue, in)
	}
	if !ran {
		out, err = t.runActivity(ctx, c, queue, in)
	}
	c.resume = nil
	if err != nil {
		t.runFailed(ctx, c, queue, err)
		return
	}
	t.applyOutcome(ctx, c, out)
}

// queueFor is the task queue a call's activities go to: the pinned
// workspace worker's for a workspace tool, else the turn's own (empty).
func (t *turn) queueFor(c *call) string {
	if t.fast() && c.spec.Workspace {
		return t.pin
	}
	return ""
}

// runLocal runs the call as a local activity, in this workflow task, on
// this worker. ran is false when this worker does not hold the workspace
// the call is pinned to: the call must then go to that worker's queue.
func (t *turn) runLocal(ctx workflow.Context, c *call, queue string, in activities.RunToolInput) (out results.Outcome, ran bool, err error) {
	// RunsLocally means idempotent: the same retries as the activity.
	retry := runOptions(c.spec).RetryPolicy
	opts := workflow.LocalActivityOptions{
		// RunTool enforces spec.Timeout itself; the slack covers
		// validation and storing a large output.
		StartToCloseTimeout: c.spec.Timeout + 10*time.Second,
		RetryPolicy:         retry,
	}
	// Unset, the SDK ends the retries after one StartToCloseTimeout.
	opts.ScheduleToCloseTimeout = time.Duration(retry.MaximumAttempts) * (opts.StartToCloseTimeout + retry.MaximumInterval)
	if t.ui {
		opts.Summary = callSummary(c.card.Tool, c.card.EffectiveArguments())
	}
	lctx := workflow.WithLocalActivityOptions(ctx, opts)
	err = workflow.ExecuteLocalActivity(lctx, activities.RunLocalToolName, activities.LocalToolInput{RunToolInput: in, Queue: queue}).Get(ctx, &out)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeWorkspaceElsewhere {
		return results.Outcome{}, false, nil
	}
	return out, true, err
}

// runActivity runs the call as an activity; a pinned call goes to the
// workspace worker's queue and gives up if no worker takes it in time.
func (t *turn) runActivity(ctx workflow.Context, c *call, queue string, in activities.RunToolInput) (results.Outcome, error) {
	opts := runOptions(c.spec)
	if queue != "" {
		opts.TaskQueue = queue
		opts.ScheduleToStartTimeout = t.in.Policy.workspaceTimeout()
	}
	if t.hardened() {
		// Named runs let people and the UI tell a call's runs apart.
		opts.ActivityID = runActivityID(c.card.CallID, c.runs)
		// Waiting for the cancellation to complete tells a tool that had
		// started from one that never did: the server's cancellation event
		// says which.
		opts.WaitForCancellation = true
	}
	if t.ui {
		opts.Summary = callSummary(c.card.Tool, c.card.EffectiveArguments())
	}
	actx := workflow.WithActivityOptions(ctx, opts)
	var out results.Outcome
	err := workflow.ExecuteActivity(actx, activities.RunToolName, in).Get(ctx, &out)
	return out, err
}

// nextQueued is the first queued call in call order: non-concurrent calls
// run one at a time, in the order the model made them.
func (t *turn) nextQueued() *call {
	for _, c := range t.calls {
		if c.queued {
			return c
		}
	}
	return nil
}

// runOptions derives retries from the spec. A non-idempotent tool gets one
// attempt: if its worker dies, the heartbeat timeout ends it and the turn
// reports the outcome as unknown instead of running it twice.
func runOptions(spec tool.Spec) workflow.ActivityOptions {
	opts := workflow.ActivityOptions{
		// RunTool enforces spec.Timeout itself and reports it as a tool
		// error; the slack covers validation and result upload.
		StartToCloseTimeout: spec.Timeout + 30*time.Second,
		HeartbeatTimeout:    3 * spec.HeartbeatInterval,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	}
	if spec.Idempotent {
		opts.RetryPolicy = &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    5,
		}
	}
	return opts
}

// runActivityID names one RunTool activity of a call.
func runActivityID(callID string, run int) string {
	return fmt.Sprintf("%s/run-%d", callID, run)
}

func (t *turn) runFailed(ctx workflow.Context, c *call, queue string, err error) {
	var timeoutErr *temporal.TimeoutError
	var activityErr *temporal.ActivityError
	switch {
	case ctx.Err() != nil && t.hardened() && errors.As(err, &activityErr) && activityErr.StartedEventID() == 0:
		// The server cancelled an activity no worker had started.
		c.refuse(t.interruption() + " before this tool started")
	case ctx.Err() != nil:
		c.fail(results.FailureToolError, t.interruption()+" while this tool ran; it was stopped and its outcome is unknown", "", "")
	case queue != "" && errors.As(err, &timeoutErr) && timeoutErr.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
		// Not started means not run (or, for an idempotent tool whose
		// worker died mid-run, not finished): safe to say so and move on.
		workflow.GetLogger(ctx).Warn("No worker holding the workspace took a call; the turn moves to another", "call_id", c.card.CallID, "tool", c.card.Tool)
		c.fail(results.FailureToolError, workspaceUnavailable(t.in.Policy.workspaceTimeout()), "", "")
		t.repin(ctx, queue)
	case !c.spec.Idempotent && errors.As(err, &timeoutErr):
		workflow.GetLogger(ctx).Warn("Worker lost while a non-idempotent tool ran", "call_id", c.card.CallID, "tool", c.card.Tool)
		c.fail(results.FailureOutcomeUnknown, results.OutcomeUnknownMessage, "", "")
	default:
		ref := fmt.Sprintf("%s/%s", t.id, c.card.CallID)
		workflow.GetLogger(ctx).Error("Tool activity failed", "ref", ref, "tool", c.card.Tool, "error", err)
		c.fail(results.FailureInternal, "", ref, err.Error())
	}
}

func (t *turn) applyOutcome(ctx workflow.Context, c *call, out results.Outcome) {
	switch out.Kind {
	case results.KindSuccess:
		s := *out.Success
		if len(s.Raw) > activities.MaxInlineRaw {
			// A worker without an output store sent it inline; history
			// keeps it, the card cannot.
			s.Raw = ""
		}
		if s.WorkDir != "" {
			t.workDir = s.WorkDir
		}
		c.clear()
		c.card.State = results.StateSucceeded
		c.card.Output = &s
	case results.KindToolError:
		c.fail(results.FailureToolError, out.ToolError.Message, "", "")
	case results.KindInternalError:
		workflow.GetLogger(ctx).Error("Tool reported an internal error", "ref", out.Internal.Ref, "tool", c.card.Tool)
		c.fail(results.FailureInternal, "", out.Internal.Ref, out.Internal.Detail)
	case results.KindInterrupt:
		c.clear()
		c.card.Interrupt = out.Interrupt
		c.card.State = results.StateWaitingAnswer
		if out.Interrupt.Type == results.InterruptApproval {
			c.card.State = results.StatePendingApproval
		}
	case results.KindConnectionRequired:
		c.clear()
		c.card.Connection = out.Connection
		c.card.State = results.StateWaitingConnection
	case results.KindTransfer:
		if why := t.refusedTransfer(out.Transfer.Target); why != "" {
			c.fail(results.FailureToolError, why, "", "")
			return
		}
		c.clear()
		c.card.State = results.StateSucceeded
		c.card.Transfer = out.Transfer
		if t.transfer == nil {
			t.transfer = out.Transfer
		}
	default:
		c.fail(results.FailureInternal, "", fmt.Sprintf("%s/%s", t.id, c.card.CallID), fmt.Sprintf("unknown outcome kind %q", out.Kind))
	}
}

// clear drops the fields of the previous state so the card only ever holds
// what its current state allows.
func (c *call) clear() {
	c.card.Interrupt, c.card.Connection, c.card.Output = nil, nil, nil
	c.card.Transfer, c.card.Failure, c.card.Reason = nil, nil, ""
	c.card.Queued = false
}

// setQueued marks a call waiting behind a non-concurrent one; the card
// shows it (its state stays running) when show is set.
func (c *call) setQueued(queued, show bool) {
	c.queued = queued
	c.card.Queued = queued && show
}

func (c *call) setRunning() {
	c.clear()
	c.card.State = results.StateRunning
}

func (c *call) refuse(reason string) {
	c.clear()
	c.card.State = results.StateRefused
	c.card.Reason = reason
}

func (c *call) fail(reason results.FailureReason, message, ref, detail string) {
	c.clear()
	c.card.State = results.StateFailed
	c.card.Failure = &results.Failure{Reason: reason, Message: message, Ref: ref, Detail: detail}
}

func jsonEqual(a, b json.RawMessage) bool {
	return string(results.CompactJSON(a)) == string(results.CompactJSON(b))
}

// formatDuration writes 24h rather than 24h0m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
