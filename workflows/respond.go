package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// validateUpdate is the respond Update's validator.
func (t *turn) validateUpdate(_ workflow.Context, p converter.RawValue) error {
	r, err := t.readResponse(p)
	if err != nil {
		return asUpdateFailure(err)
	}
	return asUpdateFailure(t.validateResponse(r))
}

// readResponse reads a respond payload (Update or Signal) by hand, so
// that whatever arrives is answered with a sentence.
func (t *turn) readResponse(p converter.RawValue) (Response, error) {
	var r Response
	err := readPayload(p, respondPayload, t.checked(), &r)
	return r, err
}

func (t *turn) onUpdate(ctx workflow.Context, p converter.RawValue) (results.Card, error) {
	// The validator ran just before; checking again costs nothing and
	// keeps the handler safe if it is ever called without one.
	r, err := t.readResponse(p)
	if err == nil {
		err = t.validateResponse(r)
	}
	if err != nil {
		return results.Card{}, asUpdateFailure(err)
	}
	c := t.find(r.CallID)
	target := c.applied + 1
	c.accept(ctx, r)
	// Return the card as the decision left it. A disconnected context lets
	// the handler answer even when the turn is being cancelled.
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	if err := workflow.Await(dctx, func() bool { return c.applied >= target || c.card.State.Final() }); err != nil {
		return results.Card{}, err
	}
	return c.card, nil
}

func (t *turn) receiveSignals(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, RespondName)
	if t.long() {
		// Wait for Signals without taking one in hand: a Signal this
		// coroutine held but had not applied would be lost if the run
		// continued as new before it ran again. Left in the channel,
		// whoever reads next (this coroutine or the hand-over) applies it.
		for workflow.Await(ctx, func() bool { return ch.Len() > 0 }) == nil {
			t.takeSignals(ctx)
		}
		return
	}
	for {
		// Decode by hand: a payload that is not a Response must be counted,
		// not crash the workflow task. Receiving the payload undecoded
		// counts even those the data converter cannot read (protobuf or
		// binary garbage), which the SDK would otherwise drop silently.
		var payload converter.RawValue
		if more := ch.Receive(ctx, &payload); !more {
			return
		}
		t.takeSignal(ctx, payload)
	}
}

// takeSignal applies one respond Signal, or counts it as invalid; it
// reports whether the response was accepted.
func (t *turn) takeSignal(ctx workflow.Context, payload converter.RawValue) bool {
	r, err := t.readResponse(payload)
	if err != nil {
		t.rejectSignal(err.Error())
		workflow.GetLogger(ctx).Warn("Dropped an invalid respond signal", "reason", t.lastInvalidSignal)
		return false
	}
	if t.forwardSignal(ctx, r) {
		return false
	}
	if err := t.validateResponse(r); err != nil {
		t.rejectSignal(err.Error())
		workflow.GetLogger(ctx).Warn("Dropped an invalid respond signal", "call_id", r.CallID, "reason", err.Error())
		return false
	}
	t.find(r.CallID).accept(ctx, r)
	return true
}

func (t *turn) rejectSignal(reason string) {
	t.invalidSignals++
	t.lastInvalidSignal = reason
}

func (c *call) accept(ctx workflow.Context, r Response) {
	c.pending = &r
	c.pendingAt = workflow.Now(ctx)
}

// fits says which waits each decision answers.
var fits = map[results.DecisionKind][]results.State{
	results.DecisionApprove:   {results.StatePendingApproval},
	results.DecisionDeny:      {results.StatePendingApproval},
	results.DecisionAnswer:    {results.StateWaitingAnswer},
	results.DecisionConnected: {results.StateWaitingConnection},
	results.DecisionCancel:    {results.StatePendingApproval, results.StateWaitingAnswer, results.StateWaitingConnection},
}

// validateResponse is the respond Update's validator and the Signal's
// check. It reads and never writes: a rejected response changes nothing.
// Each error is a sentence a person can act on.
func (t *turn) validateResponse(r Response) error {
	if t.status.Final() {
		return notWaiting("the turn has ended (%s); it takes no more responses", t.status)
	}
	if t.hardened() {
		if err := checkResponseSize(r); err != nil {
			return err
		}
	}
	c := t.find(r.CallID)
	if c == nil {
		if r.CallID == "" {
			return fmt.Errorf("the response names no call_id")
		}
		if child, rest := RouteResponse(t.id, r); child != t.id {
			return &rejection{kind: ErrTypeUnknownCall, err: fmt.Errorf("call %q waits in the agent turn %s; send the response there as call %q (tollgate.Client and the gateway route it)", r.CallID, child, rest.CallID)}
		}
		return &rejection{kind: ErrTypeUnknownCall, err: fmt.Errorf("there is no call %q in this turn%s", r.CallID, t.waitingHint())}
	}
	allowed, known := fits[r.Decision]
	if !known {
		return fmt.Errorf("decision %q is not one of approve, deny, answer, connected, cancel", r.Decision)
	}
	if c.pending != nil {
		return notWaiting("call %s already has a %s response from %s; a wait takes one answer", c.card.CallID, c.pending.Decision, byOrAnonymous(c.pending.By))
	}
	if !c.card.State.Waiting() {
		msg := fmt.Sprintf("call %s is %s, not waiting for a response", c.card.CallID, c.card.State)
		if n := len(c.card.Decisions); n > 0 {
			d := c.card.Decisions[n-1]
			msg += fmt.Sprintf(" (it got %s from %s)", d.Decision, byOrAnonymous(d.By))
		}
		return notWaiting("%s", msg)
	}
	if !slices.Contains(allowed, c.card.State) {
		return fmt.Errorf("call %s is %s; %s does not fit that wait (use %s)", c.card.CallID, c.card.State, r.Decision, decisionsFor(c.card.State))
	}
	if t.hardened() {
		// Fields that do not go with the decision are refused before the
		// decision's own checks, which may accept the response.
		if err := fieldsFit(r); err != nil {
			return err
		}
	}
	if t.v >= rulesVersion {
		if err := checkGroups(r.Groups); err != nil {
			return err
		}
		if a := ruleWait(c); a != nil && (r.Decision == results.DecisionApprove || r.Decision == results.DecisionDeny) {
			if err := t.checkApprover(c, a, r); err != nil {
				return err
			}
		}
	}
	if err := t.checkRemember(c, r); err != nil {
		return err
	}
	switch r.Decision {
	case results.DecisionApprove:
		if c.budget && len(r.Arguments) > 0 {
			return t.validateBudgetAnswer(c, r.Arguments)
		}
		if len(r.Arguments) > 0 {
			if err := t.schemas[c.card.Tool].Validate(r.Arguments); err != nil {
				return fmt.Errorf("the edited arguments for call %s do not validate: %v", c.card.CallID, err)
			}
		}
	case results.DecisionAnswer:
		return validateAnswer(c.card.Interrupt, r.Answer)
	}
	return fieldsFit(r)
}

func fieldsFit(r Response) error {
	if r.Decision != results.DecisionApprove && len(r.Arguments) > 0 {
		return fmt.Errorf("arguments only go with approve")
	}
	if r.Decision != results.DecisionAnswer && len(r.Answer) > 0 {
		return fmt.Errorf("an answer only goes with the answer decision")
	}
	return nil
}

func validateAnswer(in *results.Interrupt, answer json.RawMessage) error {
	if len(bytes.TrimSpace(answer)) == 0 {
		return fmt.Errorf("the answer is empty")
	}
	if !json.Valid(answer) {
		return fmt.Errorf("the answer is not valid JSON (send a question's text as a JSON string, for example \"\\\"yes\\\"\")")
	}
	switch in.Type {
	case results.InterruptChoice:
		var id string
		if err := json.Unmarshal(answer, &id); err != nil {
			return fmt.Errorf("a choice is answered with one option id as a JSON string; options: %s", optionIDs(in.Options))
		}
		for _, o := range in.Options {
			if o.ID == id {
				return nil
			}
		}
		return fmt.Errorf("%q is not one of the options: %s", id, optionIDs(in.Options))
	case results.InterruptQuestion:
		if len(in.Schema) == 0 {
			return nil
		}
		schema, err := tool.CompileSchema(in.Schema)
		if err != nil {
			return fmt.Errorf("the question's answer schema does not compile: %v", err)
		}
		if err := schema.Validate(answer); err != nil {
			return fmt.Errorf("the answer does not fit the question's schema: %v", err)
		}
	}
	return nil
}

func (t *turn) waitingHint() string {
	var ids []string
	for _, c := range t.calls {
		if c.card.State.Waiting() {
			ids = append(ids, c.card.CallID)
		}
	}
	if len(ids) == 0 {
		return "; no call is waiting"
	}
	return "; waiting: " + strings.Join(ids, ", ")
}

func optionIDs(opts []results.Option) string {
	ids := make([]string, len(opts))
	for i, o := range opts {
		ids[i] = o.ID
	}
	return strings.Join(ids, ", ")
}

// decisionOrder is the order decisions are listed in messages.
var decisionOrder = []results.DecisionKind{results.DecisionApprove, results.DecisionDeny, results.DecisionAnswer, results.DecisionConnected, results.DecisionCancel}

func decisionsFor(s results.State) string {
	var out []string
	for _, d := range decisionOrder {
		if slices.Contains(fits[d], s) {
			out = append(out, string(d))
		}
	}
	return strings.Join(out, " or ")
}

func byOrAnonymous(by string) string {
	if by == "" {
		return "an anonymous caller"
	}
	return by
}

// apply carries out an accepted response.
func (t *turn) apply(c *call) {
	r := *c.pending
	c.pending = nil
	c.card.Decisions = append(c.card.Decisions, results.Decision{
		Decision:  r.Decision,
		By:        r.By,
		At:        c.pendingAt,
		Reason:    r.Reason,
		Arguments: results.CompactJSON(r.Arguments),
		Answer:    results.CompactJSON(r.Answer),
	})
	switch r.Decision {
	case results.DecisionApprove:
		if len(r.Arguments) > 0 && !jsonEqual(r.Arguments, c.card.EffectiveArguments()) {
			c.card.EditedArguments = results.CompactJSON(r.Arguments)
		}
		if c.card.Interrupt != nil {
			// The tool itself asked; it runs again knowing it was approved.
			c.resume = &tool.Resume{Decision: r.Decision, By: r.By}
		}
		c.setRunning()
	case results.DecisionDeny:
		reason := r.Reason
		if reason == "" {
			reason = "denied by " + byOrAnonymous(r.By) + " (no reason given)"
		}
		c.refuse(reason)
	case results.DecisionAnswer, results.DecisionConnected:
		c.resume = &tool.Resume{Decision: r.Decision, Answer: results.CompactJSON(r.Answer), By: r.By}
		c.setRunning()
	case results.DecisionCancel:
		reason := r.Reason
		if reason == "" {
			reason = "cancelled by " + byOrAnonymous(r.By)
		}
		c.endWait(reason, r.By)
	}
}

// endWait ends a wait without running the tool: a declined connection is a
// tool error (the model can carry on without it), anything else a refusal.
func (c *call) endWait(reason, by string) {
	if c.card.State == results.StateWaitingConnection {
		provider := c.card.Connection.Provider
		c.fail(results.FailureToolError, fmt.Sprintf("the user did not connect %s (%s), so the tool did not run", provider, reason), "", "")
		return
	}
	c.refuse(reason)
}

func (c *call) record(ctx workflow.Context, d results.Decision) {
	d.At = workflow.Now(ctx)
	c.card.Decisions = append(c.card.Decisions, d)
}

// Kinds of refused responses, the failure type a respond Update is
// rejected with, so an HTTP caller can say 404, 409 or 422 without
// parsing sentences.
const (
	// ErrTypeUnknownCall: the turn has no call with that id.
	ErrTypeUnknownCall = "UnknownCall"
	// ErrTypeNotWaiting: the call (or the whole turn) no longer waits, or
	// already has its answer.
	ErrTypeNotWaiting = "NotWaiting"
	// ErrTypeInvalidResponse: the response does not fit the wait: a
	// decision, arguments or answer the call cannot take.
	ErrTypeInvalidResponse = "InvalidResponse"
)

// rejection is a refused response with its kind.
type rejection struct {
	kind string
	err  error
}

func (r *rejection) Error() string { return r.err.Error() }
func (r *rejection) Unwrap() error { return r.err }

func notWaiting(format string, args ...any) error {
	return &rejection{kind: ErrTypeNotWaiting, err: fmt.Errorf(format, args...)}
}

// asUpdateFailure turns a refusal into the application error the Update
// caller sees: the sentence, typed by its kind (invalid unless said
// otherwise). Non-retryable: sending the same response again cannot help.
func asUpdateFailure(err error) error {
	if err == nil {
		return nil
	}
	kind := ErrTypeInvalidResponse
	var rej *rejection
	if errors.As(err, &rej) {
		kind = rej.kind
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), kind, nil)
}
