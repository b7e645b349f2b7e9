package workflows_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/replay"
	"github.com/tollgate-dev/tollgate/workflows"
)

// sessionCorpus holds histories of AgentSession runs recorded on a real
// server by `go test ./internal/tests/e2e/ -record`: one per path (turns queued
// and continued, end while a turn waits, a transfer, the first and the
// last run of a session that continued as new).
const sessionCorpus = "testdata/histories/sessions"

const minSessionCorpus = 5

// Every recorded session history replays against this build's
// AgentSession, as starter replay replays it. A session names its turns
// <session id>/turn-<n>, so the replayer is given the recorded workflow id.
func TestSessionCorpusReplays(t *testing.T) {
	files := sessionFiles(t)
	got := replay.Files(context.Background(), files, replay.Options{DataDir: t.TempDir()})
	require.Len(t, got, len(files))
	for _, r := range got {
		assert.NoError(t, r.Err, "%s no longer replays", r.Path)
	}
}

// The session corpus catches an incompatible change: a session that
// records one command more before its first does not replay any of them.
func TestSessionCorpusCatchesIncompatibleChanges(t *testing.T) {
	extraFirst := func(ctx workflow.Context, in workflows.SessionInput) (workflows.SessionResult, error) {
		_ = workflow.SideEffect(ctx, func(workflow.Context) any { return 1 })
		_ = workflow.SideEffect(ctx, func(workflow.Context) any { return 2 })
		return workflows.AgentSession(ctx, in)
	}
	for _, f := range sessionFiles(t) {
		err := replaySession(t, f, extraFirst)
		require.Error(t, err, "%s replayed against a changed session", f)
		require.ErrorContains(t, err, "[TMPRL1100]", f)
	}
}

func sessionFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(sessionCorpus, "*.json"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), minSessionCorpus, "the session corpus in %s is missing; record it with go test ./internal/tests/e2e/ -record", sessionCorpus)
	return files
}

func replaySession(t *testing.T, file string, fn func(workflow.Context, workflows.SessionInput) (workflows.SessionResult, error)) error {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{})
	require.NoError(t, err)
	r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.AgentTurn, workflow.RegisterOptions{Name: workflows.WorkflowName})
	// The session names its turns after its own workflow id, which the
	// SDK's replayer would replace with "ReplayId": give it the recorded one.
	id := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowId()
	require.NotEmpty(t, id, "%s: the started event names no workflow id", file)
	return r.ReplayWorkflowHistoryWithOptions(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), h,
		worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{ID: id}})
}
