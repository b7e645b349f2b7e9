package tool

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate-dev/tollgate/results"
)

// Previewer is a tool that can show what a call would change before it
// runs: the diff a person approving the call reads. Preview must change
// nothing, must stay inside the same confinement as Run (a preview that
// reads a file outside the workspace leaks it onto the card), and should
// return quickly; the caller bounds it with a deadline.
//
// No diffs and no error means the call would change nothing. A call that
// would fail as it stands returns WouldFail with the sentence Run would
// give the model. Any other error is an internal one: the person is told
// only that no preview could be made.
type Previewer interface {
	Preview(ctx context.Context, call Call) ([]results.FileDiff, error)
}

type wouldFailError struct{ msg string }

func (e wouldFailError) Error() string { return e.msg }

// WouldFail is what Preview returns for a call that would fail as it
// stands (an edit whose text is not in the file, a path outside the
// workspace). The message is shown to the person deciding, so, like a
// tool_error, it is written for people and holds no internal detail.
func WouldFail(format string, args ...any) error {
	return wouldFailError{msg: fmt.Sprintf(format, args...)}
}

// WouldFailMessage reports whether err came from WouldFail, and its
// message.
func WouldFailMessage(err error) (string, bool) {
	var w wouldFailError
	if errors.As(err, &w) {
		return w.msg, true
	}
	return "", false
}

// Describe is the spec a worker reports for t (the activity DescribeTools
// answers with it, and the workflow records it): t.Spec() with defaults,
// and Previews set exactly when t implements Previewer, so a hand-written
// tool need not keep the flag and the method in step itself.
func Describe(t Tool) Spec {
	spec := t.Spec().WithDefaults()
	_, spec.Previews = t.(Previewer)
	return spec
}

// FuncWithPreview declares a tool like Func and gives it a Preview: the
// arguments are decoded into A as for Run, and arguments that do not
// decode are a WouldFail with the sentence Run would give. The spec's
// Previews is set.
func FuncWithPreview[A any](spec Spec,
	run func(ctx context.Context, call Call, args A) (results.Outcome, error),
	preview func(ctx context.Context, call Call, args A) ([]results.FileDiff, error),
) (Tool, error) {
	if preview == nil {
		return nil, fmt.Errorf("tool %s: preview function is nil", spec.Name)
	}
	spec.Previews = true
	t, err := Func(spec, run)
	if err != nil {
		return nil, err
	}
	return previewFuncTool[A]{funcTool: t.(funcTool[A]), preview: preview}, nil
}

type previewFuncTool[A any] struct {
	funcTool[A]
	preview func(context.Context, Call, A) ([]results.FileDiff, error)
}

func (t previewFuncTool[A]) Preview(ctx context.Context, call Call) ([]results.FileDiff, error) {
	args, err := decodeArgs[A](call)
	if err != nil {
		return nil, WouldFail("%v", err)
	}
	return t.preview(ctx, call, args)
}
