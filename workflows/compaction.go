package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/compact"
	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
)

// A conversation that nears its model's context window is compacted
// before the next model call (docs/long-turns.md, "Compaction"): the
// Compact activity summarises or drops its older part and stores the
// result as a new transcript chain, which the turn's later calls continue.
// The whole conversation stays stored beside it, under the turn's full
// head. A provider that refuses a call as too long gets one compaction
// and the call again.

// compactionVersion of the turn's change marker compacts the
// conversation, counts each model call's usage for the state query and
// the live stream, and carries both across continue-as-new.
const compactionVersion = modelQueuesVersion + 1

func (t *turn) compacting() bool { return t.v >= compactionVersion }

// Why a turn compacts, as the compaction event says.
const (
	compactThreshold     = "threshold"
	compactContextLength = "context_length"
)

// compactRetrySteps is how many steps a turn waits after a compaction
// that failed before it tries the threshold's compaction again.
const compactRetrySteps = 5

func (p Policy) strategy() compact.Strategy {
	if p.Compaction == "" {
		return compact.Summarize
	}
	return p.Compaction
}

func validateCompaction(p Policy) error {
	if p.ContextTokens < 0 {
		return fmt.Errorf("policy.context_tokens must not be negative")
	}
	if !p.Compaction.Valid() {
		return fmt.Errorf("policy.compaction is %q; it must be summarize, drop_oldest or off", p.Compaction)
	}
	return nil
}

// window is the model's context window in tokens: policy.context_tokens,
// else the default of the model's family, else zero (unknown: the turn
// compacts only when the provider refuses a call as too long).
func (t *turn) window() int {
	if t.in.Policy.ContextTokens > 0 {
		return t.in.Policy.ContextTokens
	}
	if t.v >= scriptedWindowVersion && strings.HasPrefix(t.in.Model, "scripted:") {
		return scripted.DefaultContextTokens
	}
	return compact.Window(t.in.Model)
}

// scriptedWindowVersion of the turn's change marker gives a scripted
// model the context window its provider enforces
// (scripted.DefaultContextTokens), so that a long scripted turn compacts
// as a turn with a real model does. Before it, a scripted turn's window
// was unknown and its conversation grew without bound.
const scriptedWindowVersion = 17

// nearWindow reports whether the next call would pass the threshold: the
// last call's input and output tokens (the provider's figures) and the
// messages added since, estimated.
func (t *turn) nearWindow() bool {
	w := t.window()
	if !t.compacting() || w == 0 || t.contextTokens == 0 || t.in.Policy.strategy() == compact.Off {
		return false
	}
	if t.compactFailed > 0 && t.step-t.compactFailed < compactRetrySteps {
		return false
	}
	// contextTokens counts what the last call read, an inline tail too.
	next := t.contextTokens + compact.Estimate(t.conv[max(t.sent, t.replyAt):])
	return next*100 > w*compact.ThresholdPercent
}

// compact runs the Compact activity and continues from the conversation
// it stored.
func (t *turn) compact(ctx workflow.Context, reason string) error {
	strategy := t.in.Policy.strategy()
	actx := workflow.WithActivityOptions(ctx, t.modelOptions(fmt.Sprintf("Compact %s step %d (%s)", t.in.Model, t.step, strategy)))
	in := activities.CompactInput{
		TurnID:     t.id,
		Model:      t.in.Model,
		Transcript: t.head,
		Messages:   t.conv[t.sent:],
		Full:       t.full,
		Strategy:   strategy,
		Window:     t.window(),
		Params:     t.in.Params,
	}
	var res activities.CompactResult
	if err := workflow.ExecuteActivity(actx, activities.CompactName, in).Get(ctx, &res); err != nil {
		t.compactFailed = t.step
		return err
	}
	t.head, t.sent, t.full = res.Transcript, len(t.conv), res.Full
	t.compactions++
	t.justCompacted = true
	// Unknown until the next call reports it.
	t.contextTokens = 0
	if res.Called {
		t.usage.InputTokens += res.Usage.InputTokens
		t.usage.OutputTokens += res.Usage.OutputTokens
		t.usage.CachedTokens += res.Usage.CachedTokens
		t.addCost(res.Cost)
		t.called(ctx, res.Usage, res.Cost, true)
	}
	countCompaction(ctx, string(strategy), reason)
	workflow.GetLogger(ctx).Info("Conversation compacted", "step", t.step, "strategy", string(strategy), "reason", reason, "compacted", res.Compacted, "kept", res.Kept)
	if t.events != nil {
		t.events.send(ctx, stream.Event{Type: stream.TypeCompaction, Step: t.step, Compaction: &stream.Compaction{
			Strategy: string(strategy), Reason: reason, Compacted: res.Compacted, Kept: res.Kept, Compactions: t.compactions,
		}})
	}
	return nil
}

// compactBeforeCall compacts when the conversation nears the window. A
// compaction that fails leaves the conversation as it was: the call may
// still fit.
func (t *turn) compactBeforeCall(ctx workflow.Context) {
	if !t.nearWindow() {
		return
	}
	if err := t.compact(ctx, compactThreshold); err != nil && ctx.Err() == nil {
		workflow.GetLogger(ctx).Warn("Compaction failed; calling the model with the conversation as it is", "error", err)
	}
}

// contextLength reports whether err is the provider's refusal of a
// conversation longer than the model's context window.
func contextLength(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeModelContextLength
}

// retryShorter answers a call the provider refused as too long (err):
// one compaction and the call again. It returns the call's outcome, and
// why the turn fails when it cannot go on.
func (t *turn) retryShorter(ctx workflow.Context, err error) (results.Message, error, string) {
	const tooLong = "the conversation is longer than the model's context window"
	switch {
	case t.in.Policy.strategy() == compact.Off:
		return results.Message{}, err, tooLong + " and policy.compaction is off"
	case t.justCompacted:
		return results.Message{}, err, tooLong + " even right after it was compacted"
	}
	if cerr := t.compact(ctx, compactContextLength); cerr != nil {
		if ctx.Err() != nil {
			return results.Message{}, cerr, ""
		}
		return results.Message{}, cerr, tooLong + " and compacting it failed: " + sentence(unwrapApp(cerr))
	}
	reply, err := t.callModel(ctx)
	if err != nil && contextLength(err) {
		return reply, err, tooLong + " even right after it was compacted"
	}
	return reply, err, ""
}

// unwrapApp is the activity's own error, without the wrapper's event ids.
func unwrapApp(err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr
	}
	return err
}

// called counts one model call's usage for the state query and publishes
// it as a usage event.
func (t *turn) called(ctx workflow.Context, u model.Usage, cost *float64, compaction bool) {
	t.lastCall = &ModelCallUsage{Step: t.step, Usage: u, Cost: cost, Compaction: compaction}
	if t.ui {
		t.showWaiting(ctx)
	}
	if t.events == nil {
		return
	}
	t.events.send(ctx, stream.Event{Type: stream.TypeUsage, Step: t.step, Usage: &stream.Usage{
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens, Cost: cost, Compaction: compaction,
		TurnTokens: t.usage.InputTokens + t.usage.OutputTokens, TurnCost: t.cost,
	}})
}

// ModelCallUsage is one model call's tokens and cost (nil when the model
// has no price); Compaction marks the call that summarised the
// conversation.
type ModelCallUsage struct {
	Step       int         `json:"step"`
	Usage      model.Usage `json:"usage"`
	Cost       *float64    `json:"cost,omitempty"`
	Compaction bool        `json:"compaction,omitempty"`
}

// fullHead is Result.FullHead: the whole conversation's head, set once
// the turn compacted.
func (t *turn) fullHead() string {
	if t.compactions == 0 {
		return ""
	}
	return t.full
}

// stateUsage is the turn's usage for the state query, from
// compactionVersion on.
func (t *turn) stateUsage() *model.Usage {
	if !t.compacting() {
		return nil
	}
	u := t.usage
	return &u
}

// shownToolCalls is Result.ToolCalls, from compactionVersion on.
func (t *turn) shownToolCalls() int {
	if !t.compacting() {
		return 0
	}
	return t.toolCalls
}
