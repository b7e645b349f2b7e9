package anthropic

import (
	"context"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/apierr"
)

// stream sends the request as a Messages stream, reports each text and
// tool-input piece to the context's stream function and returns what the
// non-streaming call would have: the SDK's accumulator rebuilds the same
// Message from the events.
func (p *Provider) stream(ctx context.Context, params anthropic.MessageNewParams, capture *apierr.Capture) (model.Response, error) {
	s := p.client.Messages.NewStreaming(ctx, params, option.WithMiddleware(capture.Middleware))
	defer s.Close()
	var msg anthropic.Message
	// Tool calls are numbered among the reply's tool calls, as other
	// providers number them, not among its content blocks.
	calls := map[int64]int{}
	stopped := false
	for s.Next() {
		ev := s.Current()
		if err := msg.Accumulate(ev); err != nil {
			return model.Response{}, &model.Error{Retryable: true, Message: "anthropic: the stream was malformed: " + err.Error()}
		}
		switch ev.Type {
		case "content_block_start":
			if ev.ContentBlock.Type == "tool_use" {
				i := len(calls)
				calls[ev.Index] = i
				model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: i, ToolCallID: ev.ContentBlock.ID, ToolName: ev.ContentBlock.Name})
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				if ev.Delta.Text != "" {
					model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: ev.Delta.Text})
				}
			case "input_json_delta":
				if i, ok := calls[ev.Index]; ok && ev.Delta.PartialJSON != "" {
					model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: i, Arguments: ev.Delta.PartialJSON})
				}
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := s.Err(); err != nil {
		return model.Response{}, p.classifier().Classify(err, capture)
	}
	if !stopped {
		// A stream that ends before message_stop was cut off; its
		// accumulated message is only part of the reply.
		return model.Response{}, &model.Error{Retryable: true, Message: "anthropic: the stream ended before the reply was complete"}
	}
	return fromMessage(&msg), nil
}
