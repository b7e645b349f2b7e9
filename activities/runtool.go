package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/tool"
)

// RunToolInput is one run of one tool call.
type RunToolInput struct {
	TurnID    string          `json:"turn_id"`
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Resume carries a person's answer when an earlier run was interrupted
	// or needed a connection.
	Resume *tool.Resume `json:"resume,omitempty"`
	// WorkDir is relative to the workspace; empty is the workspace itself.
	WorkDir string `json:"workdir,omitempty"`
	User    string `json:"user,omitempty"`
	// Execution is the turn's first run id (tool.Call.Execution); empty
	// from turns older than continue-as-new, whose one run id covers them.
	Execution string `json:"execution,omitempty"`
	// Session only labels the run's live events (tool progress).
	Session string `json:"session,omitempty"`
}

// RunTool runs a tool and returns its typed outcome. A tool's own failure,
// panic or timeout is an outcome; only infrastructure trouble (and a
// Retryable error from an idempotent tool) is an activity error.
func (a *Activities) RunTool(ctx context.Context, in RunToolInput) (results.Outcome, error) {
	logger := activity.GetLogger(ctx)
	info := activity.GetInfo(ctx)
	ref := fmt.Sprintf("%s/%s/%d", in.TurnID, in.CallID, info.Attempt)

	t, schema, ok := a.Tools.Lookup(in.Tool)
	if !ok {
		return results.FailTool("unknown tool %q", in.Tool), nil
	}
	spec := t.Spec().WithDefaults()
	if err := schema.Validate(in.Arguments); err != nil {
		return results.FailTool("invalid arguments for %s: %v", in.Tool, err), nil
	}
	workDir, err := a.workDir(in.WorkDir)
	if err != nil {
		return results.FailTool("%v", err), nil
	}

	defer timeToolRun(ctx, in.Tool, time.Now())
	runCtx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	stopBeat := heartbeat(runCtx, spec.HeartbeatInterval)
	defer stopBeat()

	runCtx = a.progressTo(runCtx, in)
	out, err := runRecovered(runCtx, t, tool.Call{
		TurnID:    in.TurnID,
		CallID:    in.CallID,
		Arguments: in.Arguments,
		Resume:    in.Resume,
		Workspace: a.Workspace,
		WorkDir:   workDir,
		User:      in.User,
		Execution: cmp.Or(in.Execution, info.WorkflowExecution.RunID),
	})
	switch {
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), worker.ErrWorkerShutdown):
		return workerStopped(ctx, ref, spec)
	case ctx.Err() != nil:
		// The workflow cancelled the call or the activity timed out: report
		// it as such rather than as the tool's outcome.
		return activityError(ref, ctx.Err())
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return results.FailTool("%s timed out after %s", in.Tool, spec.Timeout), nil
	case err != nil:
		if tool.IsRetryable(err) && spec.Idempotent {
			logger.Warn("Tool failed; retrying", "tool", in.Tool, "ref", ref, "error", err)
			return activityError(ref, temporal.NewApplicationErrorWithCause("tool failed transiently", "ToolRetryable", err))
		}
		logger.Error("Tool failed", "tool", in.Tool, "ref", ref, "error", err)
		return results.FailInternal(ref, err.Error()), nil
	}
	// A tool's own internal error gets this run's reference. This must
	// happen before Validate, which rejects an internal error without one.
	if out.Kind == results.KindInternalError && out.Internal != nil && out.Internal.Ref == "" {
		internal := *out.Internal
		internal.Ref = ref
		out.Internal = &internal
	}
	if err := out.Validate(); err != nil {
		logger.Error("Tool returned a malformed outcome", "tool", in.Tool, "ref", ref, "error", err)
		return results.FailInternal(ref, "malformed outcome: "+err.Error()), nil
	}
	if out.Kind == results.KindSuccess && out.Success.WorkDir != "" {
		rel, err := a.relWorkDir(out.Success.WorkDir)
		if err != nil {
			logger.Warn("Tool reported a working directory outside the workspace; ignored", "tool", in.Tool, "ref", ref)
			rel = ""
		}
		out = out.WithWorkDir(rel)
	}
	out = out.TruncateOutput(results.Limits{MaxBytes: spec.MaxOutputBytes, MaxLines: spec.MaxOutputLines})
	return a.storeRaw(ctx, ref, out), nil
}

// storeRaw moves a large raw output out of the result into the output
// store. If the store fails the output stays inline: history still has it,
// and failing a tool that ran would lose more.
func (a *Activities) storeRaw(ctx context.Context, ref string, out results.Outcome) results.Outcome {
	if a.Outputs == nil || out.Kind != results.KindSuccess || len(out.Success.Raw) <= MaxInlineRaw {
		return out
	}
	rawRef, err := a.Outputs.PutRaw(ctx, out.Success.Raw)
	if err != nil {
		activity.GetLogger(ctx).Warn("Could not store a large tool output; it stays in history", "ref", ref, "error", err)
		return out
	}
	countStored(ctx, len(out.Success.Raw))
	s := *out.Success
	s.Raw, s.RawRef = "", rawRef
	out.Success = &s
	return out
}

// workerStopped answers for a run this worker's own shutdown cancelled
// (its stop timeout passed while the tool ran). That is a lost worker, as
// a crash is, and must reach the workflow as one: an idempotent tool fails
// retryably, so another worker runs it again at once; a non-idempotent one
// sends no answer at all, so the heartbeat timeout ends the attempt and the
// turn reports the outcome as unknown. Answering with the cancellation
// would turn a half-run, non-idempotent tool into an internal error.
func workerStopped(ctx context.Context, ref string, spec tool.Spec) (results.Outcome, error) {
	logger := activity.GetLogger(ctx)
	if spec.Idempotent {
		logger.Warn("Worker stopped while an idempotent tool ran; it will be retried", "tool", spec.Name, "ref", ref)
		return activityError(ref, temporal.NewApplicationError("the worker stopped while this tool ran", "WorkerStopped"))
	}
	logger.Warn("Worker stopped while a non-idempotent tool ran; its outcome is unknown", "tool", spec.Name, "ref", ref)
	return activityError(ref, activity.ErrResultPending)
}

// activityError fails the activity with err. The SDK encodes the result
// even when an error is returned, and a zero Outcome refuses to encode (so
// the activity would fail with "unable to encode" instead of err, losing
// its type and a cancellation), so a valid placeholder stands in for it.
// The placeholder never reaches the workflow.
func activityError(ref string, err error) (results.Outcome, error) {
	return results.FailInternal(ref, "activity failed: "+err.Error()), err
}

// runRecovered turns a panic into an internal error: the stack goes to the
// log, never into the outcome the model sees.
func runRecovered(ctx context.Context, t tool.Tool, call tool.Call) (out results.Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			activity.GetLogger(ctx).Error("Tool panicked", "tool", t.Spec().Name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			out, err = results.Outcome{}, fmt.Errorf("tool %s panicked: %v", t.Spec().Name, r)
		}
	}()
	return t.Run(ctx, call)
}

// heartbeat reports liveness so that a lost worker is noticed within the
// heartbeat timeout rather than the whole start-to-close timeout. It runs
// on a timer rather than a goroutine of its own: stopping it is a lock,
// not a wait for another goroutine to be scheduled, which a busy worker
// would add to every model call.
func heartbeat(ctx context.Context, every time.Duration) func() {
	var mu sync.Mutex
	stopped := false
	var beat *time.Timer
	// Under the lock, so that no heartbeat is sent after the activity has
	// returned its result: stop waits for a beat under way.
	mu.Lock()
	defer mu.Unlock()
	beat = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || ctx.Err() != nil {
			return
		}
		activity.RecordHeartbeat(ctx)
		beat.Reset(every)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		beat.Stop()
	}
}

func (a *Activities) workDir(rel string) (string, error) {
	if rel == "" {
		return a.Workspace, nil
	}
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("working directory %q must be relative to the workspace", rel)
	}
	p := filepath.Join(a.Workspace, rel)
	if _, err := a.relWorkDir(p); err != nil {
		// Name what the model sent, never the workspace's host path.
		return "", fmt.Errorf("working directory %q is outside the workspace", rel)
	}
	return p, nil
}

func (a *Activities) relWorkDir(abs string) (string, error) {
	rel, err := filepath.Rel(a.Workspace, abs)
	if err != nil || rel == ".." || (len(rel) > 2 && rel[:3] == ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("working directory %q is outside the workspace", abs)
	}
	// The workspace root is ".", not "": "" on a success means "unchanged",
	// and a shell that ran `cd ..` back to the root must be able to say so.
	return rel, nil
}

// progressTo gives a tool run a context on which stream.Progress records
// the details as the activity's heartbeat (so Temporal shows them, and a
// retried attempt can read them) and publishes them as a tool_progress
// event of the turn.
func (a *Activities) progressTo(ctx context.Context, in RunToolInput) context.Context {
	return stream.WithProgress(ctx, func(details any) {
		activity.RecordHeartbeat(ctx, details)
		if a.Events == nil {
			return
		}
		b, err := json.Marshal(details)
		if err != nil {
			return
		}
		a.Events.Publish(stream.Event{Type: stream.TypeToolProgress, Turn: in.TurnID, Session: in.Session, ToolCallID: in.CallID, Progress: b})
	})
}
