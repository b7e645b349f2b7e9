package openai

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/apierr"
)

// stream sends the request with "stream": true, reports each piece to the
// context's stream function and builds the same Response that the
// non-streaming call would have returned. Usage is asked for with
// stream_options, since a stream carries none by default.
func (p *Provider) stream(ctx context.Context, params openai.ChatCompletionNewParams, capture *apierr.Capture) (model.Response, error) {
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := p.client.Chat.Completions.NewStreaming(ctx, params, option.WithMiddleware(capture.Middleware))
	defer s.Close()
	var acc chunks
	for s.Next() {
		acc.add(ctx, s.Current())
	}
	if err := s.Err(); err != nil {
		return model.Response{}, p.classifier().Classify(err, capture)
	}
	return p.fromCompletion(acc.completion())
}

// chunks gathers a streamed reply: the first choice's text and its tool
// calls by index, as Chat Completions sends them (a call's first piece has
// its id and name, later ones pieces of its arguments).
type chunks struct {
	id, content, refusal, finish string
	calls                        map[int64]*openai.ChatCompletionMessageToolCallUnion
	usage                        openai.CompletionUsage
	choices                      int
}

func (a *chunks) add(ctx context.Context, c openai.ChatCompletionChunk) {
	if a.id == "" {
		a.id = c.ID
	}
	if c.Usage.PromptTokens != 0 || c.Usage.CompletionTokens != 0 {
		a.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		a.choices = 1
		d := ch.Delta
		if d.Content != "" {
			a.content += d.Content
			model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: d.Content})
		}
		if d.Refusal != "" {
			a.refusal += d.Refusal
			model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: d.Refusal})
		}
		for _, tc := range d.ToolCalls {
			if a.calls == nil {
				a.calls = map[int64]*openai.ChatCompletionMessageToolCallUnion{}
			}
			call, ok := a.calls[tc.Index]
			if !ok {
				call = &openai.ChatCompletionMessageToolCallUnion{Type: "function"}
				a.calls[tc.Index] = call
			}
			if tc.ID != "" {
				call.ID = tc.ID
			}
			if tc.Type != "" {
				call.Type = tc.Type
			}
			call.Function.Name += tc.Function.Name
			call.Function.Arguments += tc.Function.Arguments
			model.Emit(ctx, model.Delta{
				Kind: model.DeltaToolCall, Index: int(tc.Index),
				ToolCallID: tc.ID, ToolName: tc.Function.Name, Arguments: tc.Function.Arguments,
			})
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
	}
}

// completion is the reply as one ChatCompletion, so that streamed and
// unstreamed replies go through the same mapping.
func (a *chunks) completion() *openai.ChatCompletion {
	c := &openai.ChatCompletion{ID: a.id, Usage: a.usage}
	if a.choices == 0 {
		return c
	}
	if c.ID == "" {
		// fromCompletion seeds the ids of calls that came without one from
		// the completion's id or its raw JSON, which a stream has neither
		// of; the reply itself is the seed then.
		h := sha256.New()
		h.Write([]byte(a.content))
		for _, tc := range a.calls {
			h.Write([]byte(tc.Function.Name + "\x00" + tc.Function.Arguments + "\x00"))
		}
		c.ID = "stream-" + hex.EncodeToString(h.Sum(nil)[:6])
	}
	choice := openai.ChatCompletionChoice{FinishReason: a.finish}
	choice.Message.Content = a.content
	choice.Message.Refusal = a.refusal
	idx := make([]int64, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	for _, i := range idx {
		choice.Message.ToolCalls = append(choice.Message.ToolCalls, *a.calls[i])
	}
	c.Choices = []openai.ChatCompletionChoice{choice}
	return c
}
