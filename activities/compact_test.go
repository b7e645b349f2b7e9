package activities

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/metrics/metricstest"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/compact"
	"github.com/tollgate-dev/tollgate/model/compact/compacttest"
	"github.com/tollgate-dev/tollgate/model/pricing"
	"github.com/tollgate-dev/tollgate/results"
)

func TestCompactSummarizesAndKeepsTheWholeConversation(t *testing.T) {
	provider := &fakeProvider{reply: func(req model.Request) (model.Response, error) {
		return model.Response{Message: results.AssistantText("the gist"), Usage: model.Usage{InputTokens: 1000, OutputTokens: 100}}, nil
	}}
	acts := newModelActivities(t, provider)
	acts.Prices = pricing.Default()
	require.NoError(t, acts.Prices.Merge([]byte(`{"fake:m": {"input": 2, "output": 10}}`)))
	conv := compacttest.Conversation()
	head, err := acts.Transcripts.Append("", conv[:len(conv)-1])
	require.NoError(t, err)
	rec := metricstest.New()
	env := metricsEnv(acts, rec)

	val, err := env.ExecuteActivity(acts.Compact, CompactInput{TurnID: "t", Model: "fake:m", Transcript: head, Messages: conv[len(conv)-1:], Strategy: compact.Summarize})
	require.NoError(t, err)
	var res CompactResult
	require.NoError(t, val.Get(&res))

	require.True(t, res.Called)
	require.Equal(t, model.Usage{InputTokens: 1000, OutputTokens: 100}, res.Usage)
	require.NotNil(t, res.Cost)
	require.InDelta(t, 0.003, *res.Cost, 1e-9)
	require.Equal(t, len(conv)-3, res.Compacted, "all but the system message and the last exchange")
	require.Equal(t, 2, res.Kept)

	// The summarising call sends plain text and no tools.
	require.Len(t, provider.requests, 1)
	require.Equal(t, compact.SummarySystem, provider.requests[0].System)
	require.Empty(t, provider.requests[0].Tools)
	require.Len(t, provider.requests[0].Messages, 1)

	compacted, err := acts.Transcripts.Load(res.Transcript)
	require.NoError(t, err)
	require.Equal(t, []results.Message{conv[0], results.UserText(compact.SummaryPrefix + "the gist"), conv[len(conv)-2], conv[len(conv)-1]}, compacted)
	whole, err := acts.Transcripts.Load(res.Full)
	require.NoError(t, err)
	require.Equal(t, conv, whole)

	require.Equal(t, map[string]float64{"tollgate_model_cost_total{model=m,provider=fake}": 0.003},
		rec.Gauges(metrics.ModelCostTotal, metrics.Provider, metrics.Model))
	require.Equal(t, map[string]int64{"tollgate_model_tokens{direction=input,model=m,provider=fake}": 1000, "tollgate_model_tokens{direction=output,model=m,provider=fake}": 100},
		rec.Counters(metrics.ModelTokens, metrics.Provider, metrics.Model, metrics.Direction))

	// A model call after it stores its messages after both conversations.
	cm, err := callModel(t, acts, CallModelInput{TurnID: "t", Model: "fake:m", Transcript: res.Transcript, Full: res.Full, Messages: []results.Message{results.UserText("more")}})
	require.NoError(t, err)
	whole, err = acts.Transcripts.Load(cm.Full)
	require.NoError(t, err)
	require.Len(t, whole, len(conv)+2)
	compacted, err = acts.Transcripts.Load(cm.Transcript)
	require.NoError(t, err)
	require.Len(t, compacted, 6)
}

func TestCompactDropOldestMakesNoModelCall(t *testing.T) {
	provider := &fakeProvider{reply: countingReply}
	acts := newModelActivities(t, provider)
	conv := compacttest.Conversation()
	res, err := newEnv(acts).ExecuteActivity(acts.Compact, CompactInput{TurnID: "t", Model: "fake:m", Messages: conv, Strategy: compact.DropOldest})
	require.NoError(t, err)
	var out CompactResult
	require.NoError(t, res.Get(&out))
	require.False(t, out.Called)
	require.Nil(t, out.Cost)
	require.Empty(t, provider.requests)
	compacted, err := acts.Transcripts.Load(out.Transcript)
	require.NoError(t, err)
	// The system message, the task, the note and the last exchange.
	require.Len(t, compacted, 5)
	require.Equal(t, "Fix the failing tests", compacted[1].Text(), "drop_oldest keeps the task")
	require.Contains(t, compacted[2].Text(), "14 earlier messages of this conversation were dropped")
	require.Equal(t, 14, out.Compacted)
	require.Equal(t, 2, out.Kept)
}

// drop_oldest has nothing to drop when all that is older than the last
// exchange is the task.
func TestCompactDropOldestKeepsTheTaskOrRefuses(t *testing.T) {
	acts := newModelActivities(t, &fakeProvider{reply: countingReply})
	conv := []results.Message{
		results.UserText("the task"),
		{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: "c1", Name: "read_file"}}},
		{Role: results.RoleTool, ToolCallID: "c1", ToolName: "read_file", Parts: []results.Part{results.TextPart("a long file")}},
	}
	_, err := newEnv(acts).ExecuteActivity(acts.Compact, CompactInput{TurnID: "t", Model: "fake:m", Messages: conv, Strategy: compact.DropOldest})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, ErrTypeNothingToCompact, appErr.Type())
}

func TestCompactRefusesASingleExchange(t *testing.T) {
	acts := newModelActivities(t, &fakeProvider{reply: countingReply})
	_, err := newEnv(acts).ExecuteActivity(acts.Compact, CompactInput{TurnID: "t", Model: "fake:m", Messages: []results.Message{results.UserText("hi")}, Strategy: compact.Summarize})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, ErrTypeNothingToCompact, appErr.Type())
}
