package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/metrics/metricstest"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/payloadstore"
	"github.com/tollgate-dev/tollgate/tool"
)

// metricsEnv is newEnv with the activities' metrics going to rec.
func metricsEnv(acts *Activities, rec *metricstest.Recorder) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	suite.SetMetricsHandler(rec)
	env := suite.NewTestActivityEnvironment()
	env.SetTestTimeout(30 * time.Second)
	env.RegisterActivity(acts)
	return env
}

func TestCallModelCountsCallsAndTokensByProviderAndModel(t *testing.T) {
	failing := false
	provider := &fakeProvider{reply: func(req model.Request) (model.Response, error) {
		if failing {
			return model.Response{}, &model.Error{Message: "overloaded", Retryable: true}
		}
		return countingReply(req)
	}}
	acts := newModelActivities(t, provider)
	rec := metricstest.New()
	env := metricsEnv(acts, rec)

	_, err := env.ExecuteActivity(acts.CallModel, CallModelInput{TurnID: "t", Model: "fake:m1", Messages: []results.Message{results.UserText("hi")}})
	require.NoError(t, err)
	failing = true
	_, err = env.ExecuteActivity(acts.CallModel, CallModelInput{TurnID: "t", Model: "fake:m1", Messages: []results.Message{results.UserText("hi")}})
	require.Error(t, err)

	require.Equal(t, map[string]int64{
		"tollgate_model_calls{model=m1,outcome=ok,provider=fake}":    1,
		"tollgate_model_calls{model=m1,outcome=error,provider=fake}": 1,
	}, rec.Counters(metrics.ModelCalls, metrics.Provider, metrics.Model, metrics.Outcome))
	require.Equal(t, map[string]int64{
		"tollgate_model_tokens{direction=input,model=m1,provider=fake}":  10,
		"tollgate_model_tokens{direction=output,model=m1,provider=fake}": 2,
	}, rec.Counters(metrics.ModelTokens, metrics.Provider, metrics.Model, metrics.Direction))
}

// Model names come from whoever starts turns; a worker labels a bounded
// number of them.
func TestModelLabelsAreCapped(t *testing.T) {
	saved := modelLabels
	modelLabels = metrics.NewCapped(MaxModelLabels)
	t.Cleanup(func() { modelLabels = saved })

	acts := newModelActivities(t, &fakeProvider{reply: countingReply})
	rec := metricstest.New()
	env := metricsEnv(acts, rec)
	for i := range MaxModelLabels + 8 {
		_, err := env.ExecuteActivity(acts.CallModel, CallModelInput{TurnID: "t", Model: fmt.Sprintf("fake:model-%d", i), Messages: []results.Message{results.UserText("hi")}})
		require.NoError(t, err)
	}
	labels := rec.LabelValues(metrics.ModelCalls, metrics.Model)
	require.Len(t, labels, MaxModelLabels+1)
	require.Contains(t, labels, metrics.Other)
	require.Equal(t, int64(8), rec.Counters(metrics.ModelCalls, metrics.Model)["tollgate_model_calls{model=other}"])
}

func TestRunToolTimesRegisteredToolsOnly(t *testing.T) {
	nap := newFake("nap", func(context.Context, tool.Call) (results.Outcome, error) {
		time.Sleep(20 * time.Millisecond)
		return results.SucceedText("rested"), nil
	})
	acts := newActivities(t, nap)
	rec := metricstest.New()
	env := metricsEnv(acts, rec)
	for _, name := range []string{"nap", "invented_by_the_model"} {
		_, err := env.ExecuteActivity(acts.RunTool, RunToolInput{TurnID: "t", CallID: "c", Tool: name, Arguments: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	runs := rec.Timers(metrics.ToolRun, metrics.Tool)
	require.Len(t, runs, 1, "only the registered tool ran, so only it is timed: %v", runs)
	require.Len(t, runs["tollgate_tool_run{tool=nap}"], 1)
	require.GreaterOrEqual(t, runs["tollgate_tool_run{tool=nap}"][0], 20*time.Millisecond)
}

func TestLargeOutputsCountTheirStoredBytes(t *testing.T) {
	raw := strings.Repeat("line\n", MaxInlineRaw/5+10)
	big := returns("big", results.Outcome{Kind: results.KindSuccess, Success: &results.Success{Parts: []results.Part{results.TextPart("done")}, Raw: raw}}, nil)
	acts := newActivities(t, big)
	store, err := payloadstore.New(t.TempDir())
	require.NoError(t, err)
	acts.Outputs = store
	rec := metricstest.New()
	env := metricsEnv(acts, rec)
	_, err = env.ExecuteActivity(acts.RunTool, RunToolInput{TurnID: "t", CallID: "c", Tool: "big", Arguments: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"tollgate_payload_store_bytes{store=output}": int64(len(raw))}, rec.Counters(metrics.PayloadStoreBytes, metrics.Store))
}

func TestAMissingTranscriptIsCountedAsAMiss(t *testing.T) {
	acts := newModelActivities(t, &fakeProvider{reply: countingReply})
	rec := metricstest.New()
	env := metricsEnv(acts, rec)
	_, err := env.ExecuteActivity(acts.CallModel, CallModelInput{TurnID: "t", Model: "fake:m1", Transcript: strings.Repeat("ab", 32), Messages: []results.Message{results.UserText("hi")}})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, ErrTypeTranscriptMissing, appErr.Type())
	require.Equal(t, map[string]int64{"tollgate_payload_store_misses{store=transcript}": 1}, rec.Counters(metrics.PayloadStoreMisses, metrics.Store))
}
