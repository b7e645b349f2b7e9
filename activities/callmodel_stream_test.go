package activities

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
)

// recorded keeps what CallModel published.
type recorded struct {
	mu     sync.Mutex
	events []stream.Event
}

func (r *recorded) Publish(ev stream.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorded) all() []stream.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]stream.Event(nil), r.events...)
}

// streamingProvider emits its reply word by word; its first call is cut
// off after the first word, as a dropped connection would.
type streamingProvider struct {
	mu    sync.Mutex
	calls int
}

func (p *streamingProvider) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	p.mu.Lock()
	p.calls++
	first := p.calls == 1
	p.mu.Unlock()
	model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: "Hello"})
	if first {
		return model.Response{}, &model.Error{Retryable: true, Message: "connection reset"}
	}
	model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: " world"})
	model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: 0, ToolCallID: "c1", ToolName: "read_file"})
	model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: 0, Arguments: `{"path":"a"}`})
	return model.Response{
		Message:    results.Message{Parts: []results.Part{results.TextPart("Hello world")}, ToolCalls: []results.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"a"}`}}},
		StopReason: model.StopToolCalls,
	}, nil
}

func TestCallModelStreamsDeltasAndResetsARetriedCall(t *testing.T) {
	store := newModelActivities(t, &fakeProvider{}).Transcripts
	acts := newActivities(t)
	acts.Transcripts = store
	acts.Models = fakeResolver{providers: map[string]model.Provider{"fake": &streamingProvider{}}}
	pub := &recorded{}
	acts.Events = pub

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(30 * time.Second)
	env.RegisterActivityWithOptions(acts.CallModel, activity.RegisterOptions{Name: CallModelName})
	in := CallModelInput{TurnID: "turn-1", Session: "sess-1", Step: 3, Model: "fake:m", Messages: []results.Message{results.UserText("hi")}}
	env.ExecuteWorkflow(func(ctx workflow.Context) (CallModelResult, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Millisecond, MaximumAttempts: 3},
		})
		var res CallModelResult
		err := workflow.ExecuteActivity(ctx, CallModelName, in).Get(ctx, &res)
		return res, err
	})
	require.NoError(t, env.GetWorkflowError())
	var res CallModelResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, "Hello world", res.Response.Message.Text(), "the result holds the retried reply once")

	evs := pub.all()
	var kinds []string
	for _, ev := range evs {
		require.Equal(t, "turn-1", ev.Turn)
		require.Equal(t, "sess-1", ev.Session)
		require.Equal(t, 3, ev.Step)
		require.Equal(t, evs[0].Call, ev.Call, "a retried call keeps its name")
		kinds = append(kinds, string(ev.Type)+":"+ev.Text+ev.ToolCallID+ev.ToolName+ev.Arguments)
	}
	require.NotEmpty(t, evs[0].Call)
	require.Equal(t, []string{
		"text:Hello",
		"reset:",
		"text:Hello", "text: world", "tool_call:c1read_file", `tool_call:{"path":"a"}`,
	}, kinds)
	require.Equal(t, 2, evs[1].Attempt)

	// What a watcher rebuilds: everything after the last reset.
	var text strings.Builder
	for _, ev := range evs {
		switch ev.Type {
		case stream.TypeReset:
			text.Reset()
		case stream.TypeText:
			text.WriteString(ev.Text)
		}
	}
	require.Equal(t, res.Response.Message.Text(), text.String())
}

func TestCallModelWithoutPublisherDoesNotStream(t *testing.T) {
	var streamed bool
	provider := &fakeProvider{reply: countingReply}
	acts := newModelActivities(t, provider)
	acts.Models = fakeResolver{providers: map[string]model.Provider{"fake": providerFunc(func(ctx context.Context, req model.Request) (model.Response, error) {
		streamed = model.Streaming(ctx)
		return countingReply(req)
	})}}
	_, err := callModel(t, acts, CallModelInput{TurnID: "t", Model: "fake:m", Messages: []results.Message{results.UserText("hi")}})
	require.NoError(t, err)
	require.False(t, streamed, "nobody publishes, so providers use their plain API")
}

type providerFunc func(context.Context, model.Request) (model.Response, error)

func (f providerFunc) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	return f(ctx, req)
}
