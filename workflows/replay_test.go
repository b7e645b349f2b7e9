package workflows_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/replay"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// corpus is the replay corpus: histories of real turns on a real server,
// one per path, recorded by `go test ./internal/tests/e2e/ -record`.
const corpus = "testdata/histories"

// minCorpus is how many paths the corpus must cover at least.
const minCorpus = 10

// Every recorded history replays against this build's AgentTurn. A failure
// names the file and carries the SDK's nondeterminism message; the fix is
// a workflow.GetVersion guard, never a re-recording.
//
// The replayer gets a payload store like the worker's, in an empty
// directory: every corpus payload is inline (the recorder refuses to write
// a history that refers to stored payloads).
func TestCorpusReplays(t *testing.T) {
	files := corpusFiles(t)
	got := replay.Files(context.Background(), []string{corpus}, replay.Options{DataDir: t.TempDir()})
	require.Len(t, got, len(files))
	for _, r := range got {
		assert.NoError(t, r.Err, "%s no longer replays", r.Path)
		assert.Positive(t, r.Events, r.Path)
	}
}

// The corpus catches a real incompatible change: copies of the workflow
// that reorder or drop its first commands, registered as AgentTurn, fail
// to replay every history with a nondeterminism error.
func TestCorpusCatchesIncompatibleChanges(t *testing.T) {
	for name, broken := range map[string]func(workflow.Context, workflows.Input) (workflows.Result, error){
		"model called before the tools are described": modelBeforeTools,
		"tools no longer described":                   toolsNotDescribed,
	} {
		t.Run(name, func(t *testing.T) {
			for _, f := range corpusFiles(t) {
				err := replayWith(t, f, broken)
				require.Error(t, err, "%s replayed against a reordered workflow", f)
				// TMPRL1100 is the SDK's code for a nondeterminism error.
				require.ErrorContains(t, err, "[TMPRL1100]", f)
			}
		})
	}
}

func corpusFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(corpus, "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), minCorpus, "the corpus in %s is missing; record it with go test ./internal/tests/e2e/ -record", corpus)
	return files
}

func replayWith(t *testing.T, file string, fn func(workflow.Context, workflows.Input) (workflows.Result, error)) error {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{})
	require.NoError(t, err)
	r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: workflows.WorkflowName})
	// The SDK logs the nondeterminism panic it returns; keep it quiet.
	return r.ReplayWorkflowHistory(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), h)
}

// modelBeforeTools is AgentTurn after a careless refactor: it asks the
// model first and describes the tools afterwards. Every recorded turn
// described its tools (a local activity marker) before its first model
// call.
func modelBeforeTools(ctx workflow.Context, in workflows.Input) (workflows.Result, error) {
	reply, err := callModel(ctx, in)
	if err != nil {
		return workflows.Result{}, err
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{ScheduleToCloseTimeout: time.Minute})
	var specs []tool.Spec
	if err := workflow.ExecuteLocalActivity(lctx, activities.DescribeToolsName, in.Tools).Get(ctx, &specs); err != nil {
		return workflows.Result{}, err
	}
	return workflows.Result{Status: workflows.StatusCompleted, Text: reply.Text()}, nil
}

// toolsNotDescribed drops the DescribeTools step altogether.
func toolsNotDescribed(ctx workflow.Context, in workflows.Input) (workflows.Result, error) {
	reply, err := callModel(ctx, in)
	if err != nil {
		return workflows.Result{}, err
	}
	return workflows.Result{Status: workflows.StatusCompleted, Text: reply.Text()}, nil
}

func callModel(ctx workflow.Context, in workflows.Input) (results.Message, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var res activities.CallModelResult
	err := workflow.ExecuteActivity(actx, activities.CallModelName, activities.CallModelInput{
		Model:    in.Model,
		Messages: []results.Message{results.UserText(in.Prompt)},
	}).Get(ctx, &res)
	return res.Response.Message, err
}

// denyEverything is a changed rule set that denies every call, and counts
// how often it is asked.
type denyEverything struct{ asked atomic.Int64 }

func (d *denyEverything) Decide(policy.Call) policy.Decision {
	d.asked.Add(1)
	return policy.Decision{Action: policy.ActionDeny, Rule: "changed", Reason: "the rules changed"}
}

// A turn's approval decisions are in its history: replayed on a worker
// whose rules now deny everything, the recorded turns (one allowed
// without asking, one approved by a quorum, one escalated, one whose
// waiting calls were re-evaluated) replay as they ran, and the new rules
// are never asked.
func TestRuleChangeDoesNotChangeAReplayedHistory(t *testing.T) {
	rules := &denyEverything{}
	f := workflows.Features{Rules: true, Policy: rules}
	for _, name := range []string{"rules_allowed", "rules_quorum", "rules_escalated", "reevaluated"} {
		require.NoError(t, replayWith(t, filepath.Join(corpus, name+".json"), f.AgentTurn), name)
	}
	require.Zero(t, rules.asked.Load())
}
