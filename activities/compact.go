package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/compact"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/transcript"
)

// ErrTypeNothingToCompact: the conversation is one exchange (or less)
// after its system messages; compaction cannot shorten it.
const ErrTypeNothingToCompact = "NothingToCompact"

// CompactInput asks to compact the conversation Transcript plus Messages
// (the messages not stored yet) before the turn's next model call.
type CompactInput struct {
	TurnID     string            `json:"turn_id"`
	Model      string            `json:"model"`
	Transcript string            `json:"transcript,omitempty"`
	Messages   []results.Message `json:"messages,omitempty"`
	// Full is the head of the whole conversation when the turn compacted
	// before; empty: Transcript is the whole conversation.
	Full     string           `json:"full,omitempty"`
	Strategy compact.Strategy `json:"strategy"`
	// Window is the model's context window in tokens, zero when unknown.
	Window int          `json:"window,omitempty"`
	Params model.Params `json:"params,omitempty"`
}

// CompactResult names the compacted conversation, which the turn's next
// model call continues, and the whole one, which people read.
type CompactResult struct {
	Transcript string `json:"transcript"`
	Full       string `json:"full"`
	// Compacted counts the messages summarised or dropped; Kept those
	// kept verbatim.
	Compacted int `json:"compacted"`
	Kept      int `json:"kept"`
	// Usage and Cost are the summarising call's (zero and nil for
	// drop_oldest); Called says whether a model call was made.
	Called bool        `json:"called,omitempty"`
	Usage  model.Usage `json:"usage"`
	Cost   *float64    `json:"cost,omitempty"`
}

// Compact shortens the conversation (package compact): the older part is
// summarised by the turn's model or dropped, the recent part stays
// verbatim. Both the compacted and the whole conversation are stored; the
// turn's later calls go on from the compacted one.
func (a *Activities) Compact(ctx context.Context, in CompactInput) (CompactResult, error) {
	conv, err := a.Transcripts.LoadWith(ctx, in.Transcript, in.Messages)
	if errors.Is(err, transcript.ErrMissing) || errors.Is(err, transcript.ErrCorrupt) {
		countTranscriptMiss(ctx, err)
		return CompactResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeTranscriptMissing, err)
	}
	if err != nil {
		return CompactResult{}, fmt.Errorf("load conversation: %w", err)
	}
	keep := in.Window * compact.KeepPercent / 100
	system, older, recent := compact.Split(conv, keep)
	nothing := temporal.NewNonRetryableApplicationError("the conversation is a single exchange; compacting cannot shorten it", ErrTypeNothingToCompact, nil)
	if len(older) == 0 {
		return CompactResult{}, nothing
	}
	res := CompactResult{Compacted: len(older), Kept: len(recent)}
	var compacted []results.Message
	switch in.Strategy {
	case compact.DropOldest:
		// The task stays: only the exchanges after it can go.
		compacted, res.Compacted, res.Kept = compact.Drop(conv, keep)
		if res.Compacted == 0 {
			return CompactResult{}, nothing
		}
	default:
		summary, err := a.summarize(ctx, in, older)
		if err != nil {
			return CompactResult{}, err
		}
		res.Called, res.Usage = true, summary.Usage
		res.Cost = a.cost(ctx, in.Model, summary.Usage)
		compacted = compact.Summarized(system, summary.Message.Text(), recent)
	}
	// The whole conversation goes on where it was: the compacted one
	// stands beside it, a chain of its own.
	full := in.Full
	if full == "" {
		full = in.Transcript
	}
	if res.Full, err = a.Transcripts.AppendContext(ctx, full, in.Messages); err != nil {
		return CompactResult{}, fmt.Errorf("store the whole conversation: %w", err)
	}
	if res.Transcript, err = a.Transcripts.AppendContext(ctx, "", compacted); err != nil {
		return CompactResult{}, fmt.Errorf("store the compacted conversation: %w", err)
	}
	// The turn's later calls load the compacted conversation only.
	a.Transcripts.Forget(in.Transcript)
	activity.GetLogger(ctx).Info("Conversation compacted", "turn", in.TurnID, "strategy", string(in.Strategy), "compacted", res.Compacted, "kept", res.Kept)
	return res, nil
}

// summarize asks the turn's model for a summary of older.
func (a *Activities) summarize(ctx context.Context, in CompactInput, older []results.Message) (model.Response, error) {
	provider, name, err := a.Models.Resolve(in.Model)
	if err != nil {
		return model.Response{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeModelRejected, nil)
	}
	// The request must itself fit: half the window, in bytes at about
	// four a token, leaves room for the summary.
	maxBytes := in.Window * 2
	stopBeat := heartbeat(ctx, callModelHeartbeatEvery)
	defer stopBeat()
	params := in.Params
	resp, err := provider.Complete(ctx, model.Request{
		Model:    name,
		System:   compact.SummarySystem,
		Messages: compact.SummaryRequest(older, maxBytes),
		Params:   params,
	})
	countModelCall(ctx, in.Model, resp, err)
	if err != nil {
		activity.GetLogger(ctx).Warn("Summarising model call failed", "model", in.Model, "error", err)
		return model.Response{}, classify(err)
	}
	if resp.Message.Text() == "" {
		return model.Response{}, temporal.NewNonRetryableApplicationError("the model returned an empty summary", ErrTypeModelRejected, nil)
	}
	return resp, nil
}
