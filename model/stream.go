package model

import "context"

// DeltaKind says what a Delta carries.
type DeltaKind string

const (
	// DeltaText is a piece of the reply's text.
	DeltaText DeltaKind = "text"
	// DeltaToolCall is a tool call as the model emits it: the first delta
	// of a call carries its ID and Name, later ones pieces of Arguments.
	DeltaToolCall DeltaKind = "tool_call"
)

// Delta is a piece of a reply as the provider streams it. Deltas are for
// people and programs watching a turn; the Response that Complete returns
// stays the whole reply, so nothing a workflow records depends on them.
type Delta struct {
	Kind DeltaKind `json:"kind"`
	Text string    `json:"text,omitempty"`
	// Index is the tool call's position in the reply, so that pieces of
	// parallel calls can be told apart.
	Index      int    `json:"index,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	Arguments  string `json:"arguments,omitempty"`
}

// StreamFunc receives deltas in the order the provider sent them. It is
// called from the goroutine that runs Complete and must not block for long.
type StreamFunc func(Delta)

type streamKey struct{}

// WithStream returns a context whose provider calls report their deltas
// to fn. Providers that cannot stream simply never call it.
func WithStream(ctx context.Context, fn StreamFunc) context.Context {
	return context.WithValue(ctx, streamKey{}, fn)
}

// Emit reports d to the context's StreamFunc, if it has one. Providers
// call it for every piece they receive.
func Emit(ctx context.Context, d Delta) {
	if fn, ok := ctx.Value(streamKey{}).(StreamFunc); ok && fn != nil {
		fn(d)
	}
}

// Streaming reports whether anyone listens for deltas on ctx, so that a
// provider may use its non-streaming API when nobody does.
func Streaming(ctx context.Context) bool {
	fn, ok := ctx.Value(streamKey{}).(StreamFunc)
	return ok && fn != nil
}
