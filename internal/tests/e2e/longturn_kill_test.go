package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// A worker process is SIGKILLed right around a long turn's continue-as-new,
// three times: once as the run nears its threshold (the workflow task that
// hands on may be in flight) and twice the moment a new run appears (its
// first workflow task in flight). A new worker takes over each time. The
// turn completes with every call answered once: across all runs each call's
// tool is recorded exactly once (a local activity's marker: read_file is a
// fast tool), and every card succeeded.
func TestLongTurnSurvivesAWorkerSIGKILLAtContinueAsNew(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the worker binary and runs it as a subprocess")
	}
	const n = 60
	build := buildWorker(t)
	e := newEnv(t, "turn_continued_sigkill")
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte("notes"), 0o600))
	replies := make([]scripted.Reply, 0, n+1)
	for i := 1; i <= n; i++ {
		replies = append(replies, reply("", call(fmt.Sprintf("r%d", i), "read_file", map[string]string{"path": "notes.txt"})))
	}
	model := e.script(append(replies, expecting(reply("Done."), 1, "notes"))...)
	bin := build()
	worker := func(name string) *workerProcess {
		return startWorkerProcess(t, e, bin, name, "TOLLGATE_SCRIPTS_DIR="+e.scripts)
	}
	w := worker("1")
	// The run continues as new from 100 events on: every 8 steps or so.
	run := e.start(workflows.Input{Prompt: "Read the notes many times", Model: model, Tools: []string{"read_file"}, MaxSteps: n + 1,
		Policy: workflows.Policy{MaxHistoryEvents: 250}})

	ctx := context.Background()
	current := func() (runID string, events int64, open bool) {
		d, err := e.caller.DescribeWorkflowExecution(ctx, run.GetID(), "")
		if err != nil {
			return "", 0, true
		}
		info := d.GetWorkflowExecutionInfo()
		return info.GetExecution().GetRunId(), info.GetHistoryLength(), info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	}
	// waitFor polls fast: a step takes a few tens of milliseconds.
	waitFor := func(what string, cond func(runID string, events int64) bool) {
		t.Helper()
		deadline := time.Now().Add(waitTimeout)
		for time.Now().Before(deadline) {
			id, events, open := current()
			require.True(t, open, "the turn ended before %s", what)
			if id != "" && cond(id, events) {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s", what)
	}
	first := run.GetRunID()
	waitFor("the first run nearing its threshold", func(id string, events int64) bool { return id == first && events >= 92 })
	w.kill(t)
	w = worker("2")
	for i := range 2 {
		before, _, _ := current()
		waitFor("a new run", func(id string, _ int64) bool { return id != before })
		w.kill(t)
		w = worker(fmt.Sprint(i + 3))
	}

	latest := e.latest(run)
	res := e.result(latest)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Done.", res.Text)
	require.Equal(t, n, res.ToolCalls)
	succeeded := 0
	for _, c := range res.Cards {
		if c.State == results.StateSucceeded {
			succeeded++
		}
	}
	if res.Omitted != nil {
		succeeded += res.Omitted.ByState[results.StateSucceeded]
	}
	require.Equal(t, n, succeeded, "every call answered")

	ids, _ := e.runsOf(run)
	require.GreaterOrEqual(t, len(ids), 4, "the turn continued as new at least three times")
	// read_file is a fast tool: it runs as a local activity, recorded in
	// a marker once it ran (a marker's activity id is a sequence number,
	// not the call's). A call run again in a later run would add a marker
	// or an activity; one lost with a killed worker's task adds neither.
	scheduled, recorded := map[string]int{}, 0
	for _, id := range ids {
		for _, ev := range e.history(e.caller.GetWorkflow(ctx, run.GetID(), id)) {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activities.RunToolName {
				callID, _, _ := strings.Cut(a.GetActivityId(), "/")
				scheduled[callID]++
				recorded++
			}
			if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "LocalActivity" {
				var la struct{ ActivityType string }
				if p := m.GetDetails()["data"].GetPayloads(); len(p) > 0 && json.Unmarshal(p[0].GetData(), &la) == nil && la.ActivityType == activities.RunLocalToolName {
					recorded++
				}
			}
		}
	}
	require.Equal(t, n, recorded, "each call's tool is recorded once across the runs")
	for callID, times := range scheduled {
		require.Equal(t, 1, times, "call %s's tool was scheduled %d times across the runs", callID, times)
	}
}
