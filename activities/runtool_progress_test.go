package activities

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/tool"
)

// A tool's stream.Progress reaches the turn's live events and the
// activity's heartbeat details.
func TestRunToolForwardsProgress(t *testing.T) {
	slow := tool.MustFunc(tool.Spec{Name: "slow", Description: "Work in steps."}, func(ctx context.Context, _ tool.Call, _ struct{}) (results.Outcome, error) {
		for i := 1; i <= 3; i++ {
			stream.Progress(ctx, map[string]int{"done": i, "of": 3})
		}
		return results.SucceedText("finished"), nil
	})
	acts := newActivities(t, slow)
	pub := &recorded{}
	acts.Events = pub
	env := newEnv(acts)
	var beats []string
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var d map[string]int
		if details.HasValues() && details.Get(&d) == nil {
			b, _ := json.Marshal(d)
			beats = append(beats, string(b))
		}
	})
	out, err := runTool(t, env, acts, RunToolInput{TurnID: "turn-p", CallID: "c9", Session: "s1", Tool: "slow"})
	require.NoError(t, err)
	require.Equal(t, results.KindSuccess, out.Kind)

	var got []string
	for _, ev := range pub.all() {
		require.Equal(t, stream.TypeToolProgress, ev.Type)
		require.Equal(t, "turn-p", ev.Turn)
		require.Equal(t, "s1", ev.Session)
		require.Equal(t, "c9", ev.ToolCallID)
		got = append(got, string(ev.Progress))
	}
	want := []string{`{"done":1,"of":3}`, `{"done":2,"of":3}`, `{"done":3,"of":3}`}
	require.Equal(t, want, got)
	// The SDK throttles what reaches the server; the first goes at once.
	require.Contains(t, beats, want[0], "the details are the heartbeat's too")
}
