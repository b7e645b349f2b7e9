package mcp

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/tool"
)

// A call sends a progress token; the server's progress notifications for
// it become the activity's heartbeat details, as Progress values, in
// order, cleaned; another token's are not recorded.
func TestProgressNotificationsBecomeHeartbeatDetails(t *testing.T) {
	f := openStdio(t, nil)
	steps := f.tool(t, "t.steps")

	var mu sync.Mutex
	var seen []Progress
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p Progress
		if details.HasValues() && details.Get(&p) == nil {
			mu.Lock()
			seen = append(seen, p)
			mu.Unlock()
		}
	})
	env.RegisterActivityWithOptions(func(ctx context.Context) (results.Outcome, error) {
		// As RunTool does: stream.Progress records the heartbeat.
		ctx = stream.WithProgress(ctx, func(d any) { activity.RecordHeartbeat(ctx, d) })
		return steps.Run(ctx, tool.Call{TurnID: "turn-p", CallID: "call-1"})
	}, activity.RegisterOptions{Name: "steps"})
	val, err := env.ExecuteActivity("steps")
	require.NoError(t, err)
	var out results.Outcome
	require.NoError(t, val.Get(&out))
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, "stepped", out.Success.Parts[0].Text)
	mu.Lock()
	defer mu.Unlock()
	// The SDK throttles heartbeats: the first goes at once, later ones
	// at most once per throttle interval, so a quick call shows its first.
	require.NotEmpty(t, seen)
	require.Equal(t, Progress{Progress: 1, Total: 3, Message: "step 1[0m"}, seen[0], "the control character is cleaned out")
	for _, p := range seen {
		require.NotEqual(t, float64(99), p.Progress, "another token's progress is not recorded")
	}
}
