package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/transcript"
	"github.com/tollgate-dev/tollgate/stream"
)

// CallModel heartbeats while it waits for the provider, so that a worker
// that dies mid-call is noticed within CallModelHeartbeatTimeout instead
// of the activity's whole start-to-close timeout (minutes for a slow
// model). The workflow schedules CallModel with HeartbeatTimeout set to
// CallModelHeartbeatTimeout; four intervals per timeout leave room for a
// slow heartbeat RPC. The SDK throttles what reaches the server to one
// heartbeat per 80% of the timeout, so a short interval costs no RPCs.
const (
	CallModelHeartbeatInterval = 5 * time.Second
	CallModelHeartbeatTimeout  = 4 * CallModelHeartbeatInterval
)

// callModelHeartbeatEvery is CallModelHeartbeatInterval; tests shorten it.
var callModelHeartbeatEvery = CallModelHeartbeatInterval

// CallModelInput asks for the model's next message. Only the messages
// added since the last call travel in history; the rest is named by
// Transcript, the head of the stored conversation.
type CallModelInput struct {
	TurnID string `json:"turn_id"`
	Model  string `json:"model"`
	System string `json:"system,omitempty"`
	// Transcript is the head returned by the previous call; empty means
	// Messages is the whole conversation.
	Transcript string            `json:"transcript,omitempty"`
	Messages   []results.Message `json:"messages"`
	Tools      []model.ToolDef   `json:"tools,omitempty"`
	// ToolsRef names the tool definitions an earlier call stored
	// (CallModelResult.ToolsRef), sent instead of Tools.
	ToolsRef string `json:"tools_ref,omitempty"`
	// StoreTools asks the call to store Tools and return their ToolsRef,
	// so that the turn's later calls send the reference.
	StoreTools bool         `json:"store_tools,omitempty"`
	Params     model.Params `json:"params,omitempty"`
	// Step and Session only label the call's live events: the turn's
	// step this call is for, and the session the turn belongs to.
	Step    int    `json:"step,omitempty"`
	Session string `json:"session,omitempty"`
	// Full is the head of the whole conversation of a turn that
	// compacted: Transcript then names the compacted conversation the
	// model reads, and the call's messages and reply are stored after
	// both.
	Full string `json:"full,omitempty"`
	// InlineTail lets the call leave Messages and a reply that asks for
	// tools unstored while their chunk would be smaller than this many
	// bytes (CallModelResult.Deferred); zero stores every call's.
	InlineTail int `json:"inline_tail,omitempty"`
}

// InlineTailBytes is the InlineTail a turn offers. Creating a chunk's
// file cost a tool call 3 to 6% over the bare loop of the same
// activities (bench row 1b), a kilobyte more in every call's input about
// 0.6%, so a short tail travels inline until it is worth a file.
const InlineTailBytes = 4 << 10

// CallModelResult is the model's reply and the new transcript head, which
// already includes the reply. An empty Transcript means the conversation
// could not be stored: the next call must send the whole conversation,
// this reply included, with an empty Transcript.
type CallModelResult struct {
	Transcript string         `json:"transcript"`
	Response   model.Response `json:"response"`
	// Cost is what the call cost in US dollars, priced when it was made;
	// nil when the model has no price.
	Cost *float64 `json:"cost,omitempty"`
	// Full is the whole conversation's new head when the input had one;
	// empty when it could not be stored.
	Full string `json:"full,omitempty"`
	// Deferred says the call's messages and the reply were not stored
	// (CallModelInput.InlineTail): Transcript and Full are the input's,
	// and the next call sends those messages again, or StoreTranscript
	// stores them.
	Deferred bool `json:"deferred,omitempty"`
	// ToolsRef names the input's Tools, stored when it asked
	// (StoreTools); empty when they could not be stored.
	ToolsRef string `json:"tools_ref,omitempty"`
}

// CallModel loads the conversation, calls the provider and stores the new
// messages with the reply.
//
// A reply that was received is never thrown away because of a local
// failure: a failed retry would pay for the same model call again (ten
// times with a full disk). So if storing fails, the reply is returned
// with an empty head and the workflow resends the whole conversation next
// time. Likewise a stored conversation that cannot be read, missing or
// damaged, fails at once as ErrTypeTranscriptMissing, which the workflow
// answers by resending it, rather than retrying a read that will fail
// the same way.
func (a *Activities) CallModel(ctx context.Context, in CallModelInput) (CallModelResult, error) {
	provider, name, err := a.Models.Resolve(in.Model)
	if err != nil {
		// An unknown provider or a malformed name is a configuration
		// problem: retrying will not help unless the resolver says so.
		var classified *model.Error
		if !errors.As(err, &classified) {
			return CallModelResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeModelRejected, nil)
		}
		return CallModelResult{}, classify(err)
	}
	conv, err := a.Transcripts.LoadWith(ctx, in.Transcript, in.Messages)
	if errors.Is(err, transcript.ErrMissing) || errors.Is(err, transcript.ErrCorrupt) {
		countTranscriptMiss(ctx, err)
		activity.GetLogger(ctx).Warn("Stored conversation unusable; the workflow will resend it", "turn", in.TurnID, "error", err)
		return CallModelResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeTranscriptMissing, err)
	}
	if err != nil {
		return CallModelResult{}, fmt.Errorf("load conversation: %w", err)
	}
	tools, err := a.callTools(ctx, in)
	if err != nil {
		return CallModelResult{}, err
	}
	stopBeat := heartbeat(ctx, callModelHeartbeatEvery)
	defer stopBeat()
	resp, err := provider.Complete(a.streamTo(ctx, in), model.Request{
		Model:    name,
		System:   in.System,
		Messages: conv,
		Tools:    tools,
		Params:   in.Params,
	})
	countModelCall(ctx, in.Model, resp, err)
	if err != nil {
		activity.GetLogger(ctx).Warn("Model call failed", "model", in.Model, "error", err)
		return CallModelResult{}, classify(err)
	}
	resp.Message.Role = results.RoleAssistant
	cost := a.cost(ctx, in.Model, resp.Usage)
	// The conversation with the reply is the next call's: kept, it is
	// not read back from the store.
	n := len(in.Messages) + 1
	conv = append(conv, resp.Message)
	added := conv[len(conv)-n:]
	// A reply that asks for tools may leave a small tail unstored; a
	// final reply is always stored, so a finished turn's head holds it.
	inlineBelow := 0
	if len(resp.Message.ToolCalls) > 0 {
		inlineBelow = in.InlineTail
	}
	toolsRef := a.storeTools(ctx, in)
	head, stored, err := a.Transcripts.ExtendUnlessSmall(ctx, in.Transcript, conv, n, inlineBelow)
	if err == nil && !stored {
		return CallModelResult{Transcript: in.Transcript, Response: resp, Cost: cost, Full: in.Full, Deferred: true, ToolsRef: toolsRef}, nil
	}
	if err != nil {
		// The error names the chunk's path and the OS error, never the
		// messages, so it is safe to log.
		activity.GetLogger(ctx).Warn("Conversation not stored; returning the reply without a transcript head, the workflow will resend the whole conversation",
			"turn", in.TurnID, "model", in.Model, "error", err)
		return CallModelResult{Transcript: "", Response: resp, Cost: cost, ToolsRef: toolsRef}, nil
	}
	res := CallModelResult{Transcript: head, Response: resp, Cost: cost, ToolsRef: toolsRef}
	if in.Full != "" {
		if res.Full, err = a.Transcripts.AppendContext(ctx, in.Full, added); err != nil {
			// The model goes on from the compacted conversation; only the
			// copy people read is cut short.
			activity.GetLogger(ctx).Warn("Whole conversation not stored", "turn", in.TurnID, "error", err)
		}
	}
	return res, nil
}

// callTools are the tool definitions the call offers the model: the
// input's, or those its ToolsRef names. A reference that cannot be
// loaded fails at once as ErrTypeToolsMissing, which the workflow answers
// by sending the definitions again.
func (a *Activities) callTools(ctx context.Context, in CallModelInput) ([]model.ToolDef, error) {
	if in.ToolsRef == "" {
		return in.Tools, nil
	}
	tools, err := a.Transcripts.Tools(ctx, in.ToolsRef)
	if errors.Is(err, transcript.ErrMissing) || errors.Is(err, transcript.ErrCorrupt) {
		activity.GetLogger(ctx).Warn("Stored tool definitions unusable; the workflow will resend them", "turn", in.TurnID, "error", err)
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeToolsMissing, err)
	}
	if err != nil {
		return nil, fmt.Errorf("load tool definitions: %w", err)
	}
	return tools, nil
}

// storeTools stores the input's tool definitions when it asks, and
// returns their reference; "" when it did not ask or they could not be
// stored, and the turn goes on sending them.
func (a *Activities) storeTools(ctx context.Context, in CallModelInput) string {
	if !in.StoreTools || len(in.Tools) == 0 {
		return ""
	}
	ref, err := a.Transcripts.PutTools(ctx, in.Tools)
	if err != nil {
		activity.GetLogger(ctx).Warn("Tool definitions not stored; the turn sends them with every call", "turn", in.TurnID, "error", err)
		return ""
	}
	return ref
}

// cost prices a call's usage and counts it, nil when the price is unknown.
func (a *Activities) cost(ctx context.Context, modelString string, u model.Usage) *float64 {
	if a.Prices == nil {
		return nil
	}
	usd, ok := a.Prices.Cost(modelString, u)
	if !ok {
		return nil
	}
	countModelCost(ctx, modelString, usd)
	return &usd
}

// classify maps provider errors onto Temporal's retry semantics: rate
// limits and 5xx retry (after Retry-After when given), the rest do not.
// A context-length refusal has its own type, so the workflow can tell it
// from a request that is wrong in itself.
func classify(err error) error {
	e := model.AsError(err)
	if e.ContextLength {
		return temporal.NewNonRetryableApplicationError(e.Error(), ErrTypeModelContextLength, nil)
	}
	if !e.Retryable {
		return temporal.NewNonRetryableApplicationError(e.Error(), ErrTypeModelRejected, nil)
	}
	return temporal.NewApplicationErrorWithOptions(e.Error(), ErrTypeModelUnavailable, temporal.ApplicationErrorOptions{
		NextRetryDelay: e.RetryAfter,
	})
}

// streamTo returns ctx with a stream function that publishes the call's
// deltas as live events. A retried call first says so with a reset event,
// since the deltas of the attempt before it are void. The activity id
// names the call: it is unique in the turn's run and kept across retries.
func (a *Activities) streamTo(ctx context.Context, in CallModelInput) context.Context {
	if a.Events == nil {
		return ctx
	}
	info := activity.GetInfo(ctx)
	base := stream.Event{Turn: in.TurnID, Session: in.Session, Call: info.ActivityID, Step: in.Step}
	if info.Attempt > 1 {
		ev := base
		ev.Type, ev.Attempt = stream.TypeReset, int(info.Attempt)
		a.Events.Publish(ev)
	}
	return model.WithStream(ctx, func(d model.Delta) {
		ev := base
		switch d.Kind {
		case model.DeltaText:
			ev.Type, ev.Text = stream.TypeText, d.Text
		case model.DeltaToolCall:
			ev.Type, ev.Index, ev.ToolCallID, ev.ToolName, ev.Arguments = stream.TypeToolCall, d.Index, d.ToolCallID, d.ToolName, d.Arguments
		default:
			return
		}
		a.Events.Publish(ev)
	})
}
