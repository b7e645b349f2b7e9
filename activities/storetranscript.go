package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/tollgate-dev/tollgate/results"
)

// StoreTranscriptName is the activity that stores the messages model
// calls left inline (CallModelResult.Deferred), for a turn that ends or
// hands on before its next model call would have stored them.
const StoreTranscriptName = "StoreTranscript"

// StoreTranscriptInput names the stored conversation and the messages
// after it that the store does not hold yet.
type StoreTranscriptInput struct {
	TurnID     string            `json:"turn_id"`
	Transcript string            `json:"transcript,omitempty"`
	Messages   []results.Message `json:"messages"`
	// Full is the whole conversation's head of a turn that compacted;
	// the messages are stored after it too.
	Full string `json:"full,omitempty"`
}

// StoreTranscriptResult is the new head, and the whole conversation's
// when the input had one (empty when that could not be stored).
type StoreTranscriptResult struct {
	Transcript string `json:"transcript"`
	Full       string `json:"full,omitempty"`
}

// StoreTranscript stores the messages after Transcript, and after Full.
// A failure is retried by the workflow's policy; the turn, if it still
// fails, carries its whole conversation instead.
func (a *Activities) StoreTranscript(ctx context.Context, in StoreTranscriptInput) (StoreTranscriptResult, error) {
	head, err := a.Transcripts.AppendContext(ctx, in.Transcript, in.Messages)
	if err != nil {
		return StoreTranscriptResult{}, fmt.Errorf("store the conversation's last messages: %w", err)
	}
	res := StoreTranscriptResult{Transcript: head}
	if in.Full != "" {
		if res.Full, err = a.Transcripts.AppendContext(ctx, in.Full, in.Messages); err != nil {
			// As in CallModel: only the copy people read is cut short.
			activity.GetLogger(ctx).Warn("Whole conversation not stored", "turn", in.TurnID, "error", err)
		}
	}
	return res, nil
}
