package turnlist

import (
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/tollgate-dev/tollgate/workflows"
)

func TestQuery(t *testing.T) {
	require.Equal(t, "WorkflowType = 'AgentTurn'", Filter{}.Query())
	require.Equal(t, "WorkflowType = 'AgentTurn' AND TollgateStatus = 'waiting' AND TollgateUser = 'ann@example.com'",
		Filter{Status: workflows.StatusWaiting, User: "ann@example.com"}.Query())
	require.Equal(t, "WorkflowType = 'AgentTurn' AND TollgateUser IN ('ann', 'bob')", Filter{Users: []string{"ann", "bob"}}.Query())
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
	} {
		require.Error(t, f.Check(), name)
	}
}

func TestExecutionStatus(t *testing.T) {
	require.Equal(t, workflows.StatusRunning, executionStatus(enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING))
	require.Equal(t, workflows.StatusCancelled, executionStatus(enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED))
	require.Equal(t, workflows.StatusFailed, executionStatus(enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED))
}
