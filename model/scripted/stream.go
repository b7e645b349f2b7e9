package scripted

import (
	"context"
	"time"
	"unicode"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

// argChunk is how many bytes of a tool call's arguments one delta carries,
// about what a real model streams per token.
const argChunk = 12

// stream plays msg as deltas: the text a word at a time (each word with
// the spaces before it), then each tool call, its id and name first and
// its arguments in small pieces, with the provider's pace before each.
func (p *Provider) stream(ctx context.Context, msg results.Message) error {
	for _, w := range words(msg.Text()) {
		if err := p.wait(ctx); err != nil {
			return err
		}
		model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: w})
	}
	for i, c := range msg.ToolCalls {
		if err := p.wait(ctx); err != nil {
			return err
		}
		model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: i, ToolCallID: c.ID, ToolName: c.Name})
		for off := 0; off < len(c.Arguments); off += argChunk {
			if err := p.wait(ctx); err != nil {
				return err
			}
			end := min(off+argChunk, len(c.Arguments))
			model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: i, Arguments: c.Arguments[off:end]})
		}
	}
	return nil
}

func (p *Provider) wait(ctx context.Context) error {
	if p.pace <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(p.pace)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		// Like a provider whose connection was cut: worth another try.
		return &model.Error{Retryable: true, Message: "scripted: the call was cancelled while streaming"}
	}
}

// words splits s into pieces that join back to s exactly: each is a
// word with the whitespace that precedes it.
func words(s string) []string {
	var out []string
	start, inWord := 0, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if inWord && space {
			out = append(out, s[start:i])
			start = i
		}
		inWord = !space
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
