package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// PreviewToolName is the activity type of PreviewTool.
const PreviewToolName = "PreviewTool"

// PreviewTimeout bounds one preview. A person is looking at the card;
// past this the card shows no preview rather than keep them waiting.
const PreviewTimeout = 10 * time.Second

// previewTimeout is PreviewTimeout; tests shorten it.
var previewTimeout = PreviewTimeout

// PreviewLostNote is the card's preview note for a workflow whose
// PreviewTool activity failed or timed out (its worker was lost): the
// activity itself never fails, so that is the only case left to the
// workflow.
const PreviewLostNote = "no preview: the worker did not answer in time"

// PreviewToolInput is a call waiting for approval whose change is to be
// shown. It carries what RunToolInput carries for the call's first run,
// so that the preview resolves paths exactly as the run would (WorkDir
// matters: a relative path is relative to it).
type PreviewToolInput struct {
	TurnID    string          `json:"turn_id"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	WorkDir   string          `json:"workdir,omitempty"`
	User      string          `json:"user,omitempty"`
}

// PreviewToolResult is what the card shows: Diffs go to Card.Preview
// (already bounded with results.BoundPreview) and Reason to
// Card.PreviewNote.
type PreviewToolResult struct {
	Diffs []results.FileDiff `json:"diffs,omitempty"`
	// Reason is one sentence for people, set when there is something to
	// say: the call as it stands would fail (with the tool's own reason),
	// it would change nothing, or why no preview was made. It never holds
	// an internal error's text; those go to the worker's log under a ref
	// the sentence names.
	Reason string `json:"reason,omitempty"`
}

// PreviewTool shows what a call waiting for approval would change, for
// tools that implement tool.Previewer (tool.Spec.Previews). It changes
// nothing, and it never fails: an unknown tool, a tool that cannot
// preview, arguments the run would refuse, a preview that errs, panics
// or outlasts PreviewTimeout all give an empty preview and a Reason, since
// none of them is a failure of the call, which still waits for its
// decision.
func (a *Activities) PreviewTool(ctx context.Context, in PreviewToolInput) (PreviewToolResult, error) {
	ref := fmt.Sprintf("%s/%s/preview", in.TurnID, in.CallID)
	res := a.preview(ctx, in, ref)
	res.Reason, _ = results.Truncate(res.Reason, results.Limits{MaxBytes: results.MaxPreviewNote})
	return res, nil
}

func (a *Activities) preview(ctx context.Context, in PreviewToolInput, ref string) PreviewToolResult {
	none := func(format string, args ...any) PreviewToolResult {
		return PreviewToolResult{Reason: fmt.Sprintf(format, args...)}
	}
	t, ok := a.Tools.Get(in.Tool)
	if !ok {
		return none("no preview: this worker has no tool %s", in.Tool)
	}
	p, ok := t.(tool.Previewer)
	if !ok {
		return none("no preview: %s cannot show what a call would change", in.Tool)
	}
	// The same checks, and the same sentences, as RunTool: what the run
	// would refuse, the preview foresees.
	schema, _ := a.Tools.Schema(in.Tool)
	if err := schema.Validate(in.Arguments); err != nil {
		return none("%s would fail: invalid arguments for %s: %v", in.Tool, in.Tool, err)
	}
	workDir, err := a.workDir(in.WorkDir)
	if err != nil {
		// Not workDir's sentence: it names the workspace's host path.
		return none("%s would fail: working directory %q is not inside the workspace", in.Tool, in.WorkDir)
	}

	diffs, err := previewWithin(ctx, p, tool.Call{
		TurnID:    in.TurnID,
		CallID:    in.CallID,
		Arguments: in.Arguments,
		Workspace: a.Workspace,
		WorkDir:   workDir,
		User:      in.User,
	}, in.Tool)
	if msg, ok := tool.WouldFailMessage(err); ok {
		return none("%s would fail: %s", in.Tool, msg)
	}
	if err == nil {
		err = checkDiffs(diffs)
	}
	switch {
	case errors.Is(err, errPreviewSlow) && ctx.Err() != nil:
		// The workflow no longer wants it (the call was decided first).
		return none("no preview: it was cancelled")
	case errors.Is(err, errPreviewSlow):
		return none("no preview: it took longer than %s", previewTimeout)
	case err != nil:
		// Warn, not Error: the call is unharmed. The detail stays in the
		// log; the person gets the ref to ask an operator about.
		activity.GetLogger(ctx).Warn("Tool preview failed", "tool", in.Tool, "ref", ref, "error", err)
		return none("no preview: it failed (ref %s)", ref)
	case len(diffs) == 0:
		return none("%s would change nothing", in.Tool)
	}
	return PreviewToolResult{Diffs: results.BoundPreview(diffs)}
}

// errPreviewSlow is a preview that outlasted previewTimeout.
var errPreviewSlow = errors.New("preview too slow")

// previewWithin runs the preview with a deadline and returns when it
// passes even if the tool ignores its context: the card must not wait on
// a tool's good manners. Such a tool's goroutine finishes on its own
// later, into a buffered channel nobody reads. A panic becomes an error.
func previewWithin(ctx context.Context, p tool.Previewer, call tool.Call, name string) ([]results.FileDiff, error) {
	ctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	type answer struct {
		diffs []results.FileDiff
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				activity.GetLogger(ctx).Error("Tool preview panicked", "tool", name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				done <- answer{err: fmt.Errorf("preview of %s panicked: %v", name, r)}
			}
		}()
		diffs, err := p.Preview(ctx, call)
		done <- answer{diffs, err}
	}()
	select {
	case a := <-done:
		// A preview that gave up because its context ended is slow, not
		// broken.
		if a.err != nil && ctx.Err() != nil {
			return nil, errPreviewSlow
		}
		return a.diffs, a.err
	case <-ctx.Done():
		return nil, errPreviewSlow
	}
}

// checkDiffs holds a tool's preview to what a card accepts.
func checkDiffs(diffs []results.FileDiff) error {
	for i, d := range diffs {
		if d.Path == "" {
			return fmt.Errorf("preview diff %d has no path", i)
		}
	}
	return nil
}
