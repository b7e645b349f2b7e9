package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/activities/model"
	"github.com/tollgate-dev/tollgate/activities/transcript"
	"github.com/tollgate-dev/tollgate/results"
)

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
	Params     model.Params      `json:"params,omitempty"`
}

// CallModelResult is the model's reply and the new transcript head, which
// already includes the reply.
type CallModelResult struct {
	Transcript string         `json:"transcript"`
	Response   model.Response `json:"response"`
}

// CallModel loads the conversation, calls the provider and stores the new
// messages with the reply.
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
	history, err := a.Transcripts.Load(in.Transcript)
	if errors.Is(err, transcript.ErrMissing) {
		return CallModelResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeTranscriptMissing, err)
	}
	if err != nil {
		return CallModelResult{}, fmt.Errorf("load conversation: %w", err)
	}
	conv := append(history, in.Messages...)
	resp, err := provider.Complete(ctx, model.Request{
		Model:    name,
		System:   in.System,
		Messages: conv,
		Tools:    in.Tools,
		Params:   in.Params,
	})
	if err != nil {
		activity.GetLogger(ctx).Warn("Model call failed", "model", in.Model, "error", err)
		return CallModelResult{}, classify(err)
	}
	resp.Message.Role = results.RoleAssistant
	added := append(append([]results.Message(nil), in.Messages...), resp.Message)
	head, err := a.Transcripts.Append(in.Transcript, added)
	if err != nil {
		return CallModelResult{}, fmt.Errorf("store conversation: %w", err)
	}
	return CallModelResult{Transcript: head, Response: resp}, nil
}

// classify maps provider errors onto Temporal's retry semantics: rate
// limits and 5xx retry (after Retry-After when given), the rest do not.
func classify(err error) error {
	e := model.AsError(err)
	if !e.Retryable {
		return temporal.NewNonRetryableApplicationError(e.Error(), ErrTypeModelRejected, nil)
	}
	return temporal.NewApplicationErrorWithOptions(e.Error(), ErrTypeModelUnavailable, temporal.ApplicationErrorOptions{
		NextRetryDelay: e.RetryAfter,
	})
}
