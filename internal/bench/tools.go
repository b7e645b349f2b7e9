package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Tool names the benchmark's scripts call. NoopLocalTool is NoopTool
// marked to run as a local activity (tool.Spec.Local).
const (
	NoopTool      = "noop"
	NoopLocalTool = "noop_local"
	BlobTool      = "blob"
)

type noArgs struct{}

type blobArgs struct {
	Bytes int `json:"bytes"`
}

// Tools are the benchmark's tools: noop does nothing (noop_local too, as
// a local activity), blob returns a text of the asked size (different for
// every call, so no store can dedupe it).
func Tools() []tool.Tool {
	noopFn := func(context.Context, tool.Call, noArgs) (results.Outcome, error) {
		return results.SucceedText("ok"), nil
	}
	noop := tool.MustFunc(tool.Spec{Name: NoopTool, Description: "Does nothing.", Idempotent: true, Concurrent: true}, noopFn)
	noopLocal := tool.MustFunc(tool.Spec{Name: NoopLocalTool, Description: "Does nothing, locally.", Idempotent: true, Concurrent: true, Local: true}, noopFn)
	blob := tool.MustFunc(tool.Spec{Name: BlobTool, Description: "Returns a text of the given size.", Idempotent: true, Concurrent: true},
		func(_ context.Context, call tool.Call, a blobArgs) (results.Outcome, error) {
			return results.SucceedText(Blob(call.TurnID+"/"+call.CallID, a.Bytes)), nil
		})
	return []tool.Tool{noop, noopLocal, blob}
}

// Blob is n bytes of text in lines of 128, seeded so that every call's
// text differs.
func Blob(seed string, n int) string {
	var b strings.Builder
	b.Grow(n)
	line := 0
	for b.Len() < n {
		s := fmt.Sprintf("%s line %d: lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore", seed, line)
		if len(s) > 127 {
			s = s[:127]
		}
		b.WriteString(s)
		b.WriteByte('\n')
		line++
	}
	return b.String()[:n]
}

// Script writes a script of steps replies, each making calls calls to
// toolName with args, then a final text reply, and returns its model name.
// The model has the scripted model's default context window.
func (e *Env) Script(steps, calls int, toolName string, args any) (string, error) {
	return e.ScriptWindow(steps, calls, toolName, args, 0)
}

// ScriptWindow is Script for a model with a context window of window
// tokens (0: the scripted default). A turn playing it must say so in
// policy.context_tokens, or it compacts at the default's threshold.
func (e *Env) ScriptWindow(steps, calls int, toolName string, args any, window int) (string, error) {
	key := fmt.Sprintf("%s-%d-%d-%v-%d", toolName, steps, calls, args, window)
	if v, ok := e.scripts.Load(key); ok {
		return v.(string), nil
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	s := scripted.Script{ContextTokens: window}
	if steps > 0 {
		// One reply played steps times: the script's size must not grow
		// with the turn's, which a parse after each edit would pay for.
		r := scripted.Reply{Repeat: steps}
		for j := 0; j < calls; j++ {
			r.ToolCalls = append(r.ToolCalls, scripted.ToolCall{Name: toolName, Arguments: raw})
		}
		s.Replies = append(s.Replies, r)
	}
	s.Replies = append(s.Replies, scripted.Reply{Text: "done"})
	data, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(e.DataDir, "scripts")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	p := filepath.Join(dir, fmt.Sprintf("%s-%d-%d-%d-%d.json", toolName, steps, calls, len(raw), window))
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return "", err
	}
	// Parse it as the provider will, so a bad script fails here.
	if _, err := scripted.Open(filepath.Base(p), dir); err != nil {
		return "", err
	}
	name := "scripted:" + filepath.Base(p)
	e.scripts.Store(key, name)
	return name, nil
}

// TurnInput is a turn that runs script with the benchmark's tools.
func TurnInput(model string, steps int, approve bool) workflows.Input {
	in := workflows.Input{
		Prompt:   "benchmark",
		Model:    model,
		Tools:    []string{NoopTool, BlobTool},
		MaxSteps: steps + 1,
	}
	if approve {
		in.Policy.Approval = map[string]string{NoopTool: "always"}
	}
	return in
}

// LocalTurnInput is TurnInput with noop_local in noop's place, so the
// script's calls (of noop_local) run as local activities; the turn has
// as many tools, of the same sizes, as TurnInput's.
func LocalTurnInput(model string, steps int, approve bool) workflows.Input {
	in := TurnInput(model, steps, false)
	in.Tools = []string{NoopLocalTool, BlobTool}
	if approve {
		in.Policy.Approval = map[string]string{NoopLocalTool: "always"}
	}
	return in
}

// Bare Temporal: the same shapes with no agent loop, no typed results and
// no stored conversation.
const (
	BareSeqName   = "BareSeq"
	BareLoopName  = "BareLoop"
	BareAwaitName = "BareAwait"
	BareBlobName  = "BareBlob"

	bareNoop  = "BareNoop"
	bareModel = "BareModel"
	bareBlob  = "BareBlobActivity"

	// BareRespond is the bare workflow's update; BareStateQuery says
	// whether it is waiting.
	BareRespond    = "respond"
	BareStateQuery = "state"
)

func bareCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
}

// BareSeq runs n no-op activities one after another.
func BareSeq(ctx workflow.Context, n int) (int, error) {
	ctx = bareCtx(ctx)
	for i := 0; i < n; i++ {
		var out string
		if err := workflow.ExecuteActivity(ctx, bareNoop, i).Get(ctx, &out); err != nil {
			return i, err
		}
	}
	return n, nil
}

// BareLoop is an agent loop with nothing in it: n+1 no-op "model"
// activities with a no-op "tool" activity between each, the same number
// of activities a Tollgate turn with n sequential tool calls runs.
func BareLoop(ctx workflow.Context, n int) (int, error) {
	ctx = bareCtx(ctx)
	for i := 0; ; i++ {
		var out string
		if err := workflow.ExecuteActivity(ctx, bareModel, i).Get(ctx, &out); err != nil {
			return i, err
		}
		if i == n {
			return n, nil
		}
		if err := workflow.ExecuteActivity(ctx, bareNoop, i).Get(ctx, &out); err != nil {
			return i, err
		}
	}
}

// BareAwait waits for one respond update, then runs a no-op activity.
func BareAwait(ctx workflow.Context) (string, error) {
	approved := false
	if err := workflow.SetQueryHandler(ctx, BareStateQuery, func() (string, error) {
		if approved {
			return "running", nil
		}
		return "waiting", nil
	}); err != nil {
		return "", err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, BareRespond, func(ctx workflow.Context, decision string) (string, error) {
		approved = true
		return "approved", nil
	}, workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, decision string) error {
		if approved {
			return fmt.Errorf("already approved")
		}
		return nil
	}}); err != nil {
		return "", err
	}
	if err := workflow.Await(ctx, func() bool { return approved }); err != nil {
		return "", err
	}
	var out string
	err := workflow.ExecuteActivity(bareCtx(ctx), bareNoop, 0).Get(ctx, &out)
	return out, err
}

// BareBlob runs n activities that each return size bytes of text.
func BareBlob(ctx workflow.Context, n, size int) (int, error) {
	ctx = bareCtx(ctx)
	for i := 0; i < n; i++ {
		var out string
		if err := workflow.ExecuteActivity(ctx, bareBlob, i, size).Get(ctx, &out); err != nil {
			return i, err
		}
	}
	return n, nil
}

func bareNoopActivity(context.Context, int) (string, error) { return "ok", nil }

func bareBlobActivity(ctx context.Context, i, size int) (string, error) {
	return Blob(fmt.Sprintf("%s/%d", activity.GetInfo(ctx).WorkflowExecution.ID, i), size), nil
}

// RegisterBare registers the bare workflows and activities.
func RegisterBare(w worker.Registry) {
	w.RegisterWorkflowWithOptions(BareSeq, workflow.RegisterOptions{Name: BareSeqName})
	w.RegisterWorkflowWithOptions(BareLoop, workflow.RegisterOptions{Name: BareLoopName})
	w.RegisterWorkflowWithOptions(BareAwait, workflow.RegisterOptions{Name: BareAwaitName})
	w.RegisterWorkflowWithOptions(BareBlob, workflow.RegisterOptions{Name: BareBlobName})
	w.RegisterActivityWithOptions(bareNoopActivity, activity.RegisterOptions{Name: bareNoop})
	w.RegisterActivityWithOptions(bareNoopActivity, activity.RegisterOptions{Name: bareModel})
	w.RegisterActivityWithOptions(bareBlobActivity, activity.RegisterOptions{Name: bareBlob})
}

func activityWorkflowID(ctx context.Context) string {
	return activity.GetInfo(ctx).WorkflowExecution.ID
}
