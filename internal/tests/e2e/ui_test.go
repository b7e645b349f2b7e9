package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// What the Temporal UI shows of a parked turn, read the way the UI reads
// it: the start's static summary, the current details naming the waiting
// call, and a summary on every activity.
func TestTheUIIsToldWhatATurnWaitsFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "ui_summaries")
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "summary.md", "content": "# Summary\n"})),
		expecting(reply("Written."), 1, "created summary.md"),
	)
	e.startWorker()
	ctx := context.Background()
	tg := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}
	run, err := tg.Start(ctx, fmt.Sprintf("%s-%d", e.name, seq.Add(1)), workflows.Input{Prompt: "Summarise notes.txt\ninto summary.md", Model: model, Tools: []string{"write_file"}})
	require.NoError(t, err)
	e.waitCard(run, "w1", results.StatePendingApproval)

	d, err := e.caller.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	require.NoError(t, err)
	var summary string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(d.GetExecutionConfig().GetUserMetadata().GetSummary(), &summary))
	require.Equal(t, "Summarise notes.txt", summary)

	v, err := e.caller.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), "__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	require.Equal(t, "**Waiting for a person**\n- `w1` write_file summary.md: pending approval\n\n**Used** 120 tokens, $0.0000, 1 model call\n", md.GetCurrentDetails())

	_, err = respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "ann"})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, e.result(run).Status)

	var summaries []string
	for _, ev := range e.history(run) {
		if ev.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			continue
		}
		var s string
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(ev.GetUserMetadata().GetSummary(), &s))
		summaries = append(summaries, s)
	}
	require.Equal(t, []string{"CallModel " + model + " step 1", "preview write_file summary.md", "write_file summary.md", "CallModel " + model + " step 2"}, summaries)
	e.record(run)
}
