package stream

import "context"

type progressKey struct{}

// ProgressFunc receives what a running tool reports.
type ProgressFunc func(details any)

// WithProgress returns a context whose Progress calls reach fn. RunTool
// gives every tool run such a context.
func WithProgress(ctx context.Context, fn ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// Progress reports a tool's progress (any JSON-encodable value: a
// fraction done, a line of output, a status sentence) to whoever watches
// the turn. Outside a tool run it does nothing. It is also recorded as the
// activity's heartbeat details, so it must stay small.
func Progress(ctx context.Context, details any) {
	if fn, ok := ctx.Value(progressKey{}).(ProgressFunc); ok && fn != nil {
		fn(details)
	}
}
