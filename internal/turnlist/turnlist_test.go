package turnlist

import (
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/workflows"
)

func TestQuery(t *testing.T) {
	require.Equal(t, "WorkflowType = 'AgentTurn' AND TollgateParent IS NULL", Filter{}.Query())
	require.Equal(t, "WorkflowType = 'AgentTurn' AND TollgateStatus = 'waiting' AND ExecutionStatus = 'Running' AND TollgateUser = 'ann@example.com' AND TollgateParent IS NULL",
		Filter{Status: workflows.StatusWaiting, User: "ann@example.com"}.Query())
	require.Equal(t, "WorkflowType = 'AgentTurn' AND TollgateStatus = 'failed'", Filter{Status: workflows.StatusFailed, Children: true}.Query())
	require.Equal(t, "WorkflowType = 'AgentTurn' AND TollgateUser IN ('ann', 'bob') AND TollgateParent IS NULL", Filter{Users: []string{"ann", "bob"}}.Query())
	require.Equal(t, "WorkflowType = 'AgentTurn' AND TollgateParent = 'tollgate-1'", Filter{Parent: "tollgate-1"}.Query())
}

func TestCheck(t *testing.T) {
	require.NoError(t, Filter{Status: workflows.StatusMaxSteps, User: "Ann Lee", Limit: MaxLimit}.Check())
	for name, f := range map[string]Filter{
		"unknown status": {Status: "sleeping"},
		"quote":          {User: "a' OR '1'='1"},
		"double quote":   {User: `a"`},
		"backslash":      {User: `a\`},
		"control":        {User: "a\nb"},
		"long user":      {User: string(make([]byte, maxUserLen+1))},
		"limit":          {Limit: MaxLimit + 1},
		"negative":       {Limit: -1},
		"limit quote":    {Users: []string{"ann", "a') OR ('1'='1"}},
		"limit empty":    {Users: []string{""}},
		"parent quote":   {Parent: "t' OR '1'='1"},
		"long parent":    {Parent: string(make([]byte, maxParentLen+1))},
		"parent and all": {Parent: "tollgate-1", Children: true},
	} {
		require.Error(t, f.Check(), name)
	}
}

func TestExecutionStatus(t *testing.T) {
	require.Equal(t, workflows.StatusRunning, executionStatus(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING))
	require.Equal(t, workflows.StatusCancelled, executionStatus(enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED))
	require.Equal(t, workflows.StatusFailed, executionStatus(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED))
}

// A closed turn that still lists itself as running (terminated, or
// failed in setup on a worker from before turns listed that) reads as
// its workflow ended; a final status it listed stands.
func TestClosedTurnsReadAsTheyEnded(t *testing.T) {
	info := func(listed string, st enumspb.WorkflowExecutionStatus) *workflowpb.WorkflowExecutionInfo {
		p, err := converter.GetDefaultDataConverter().ToPayload(listed)
		require.NoError(t, err)
		return &workflowpb.WorkflowExecutionInfo{
			Execution:        &commonpb.WorkflowExecution{WorkflowId: "t", RunId: "r"},
			Status:           st,
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{workflows.StatusAttr.GetName(): p}},
		}
	}
	for _, tt := range []struct {
		listed string
		st     enumspb.WorkflowExecutionStatus
		want   workflows.Status
	}{
		{"running", enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, workflows.StatusFailed},
		{"waiting", enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, workflows.StatusFailed},
		{"running", enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, workflows.StatusCancelled},
		{"waiting", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, workflows.StatusWaiting},
		{"max_steps", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, workflows.StatusMaxSteps},
		{"failed", enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, workflows.StatusFailed},
	} {
		got := fromInfo(info(tt.listed, tt.st))
		require.Equal(t, tt.want, got.Status, "listed %s, workflow %s", tt.listed, tt.st)
		require.True(t, got.HasStatus)
	}
}
