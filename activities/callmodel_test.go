package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/transcript"
)

// fakeProvider records every request and answers with reply.
type fakeProvider struct {
	mu       sync.Mutex
	requests []model.Request
	reply    func(req model.Request) (model.Response, error)
}

func (p *fakeProvider) Complete(_ context.Context, req model.Request) (model.Response, error) {
	p.mu.Lock()
	p.requests = append(p.requests, req)
	p.mu.Unlock()
	return p.reply(req)
}

func (p *fakeProvider) calls() []model.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]model.Request(nil), p.requests...)
}

// countingReply answers "reply N" where N is the number of messages it
// was sent, so equal requests get equal replies (as on an activity retry).
// Like some real providers it leaves the role unset.
func countingReply(req model.Request) (model.Response, error) {
	return model.Response{
		Message:    results.Message{Parts: []results.Part{results.TextPart(fmt.Sprintf("reply %d", len(req.Messages)))}},
		StopReason: model.StopEnd,
		Usage:      model.Usage{InputTokens: 10 * len(req.Messages), OutputTokens: 2},
	}, nil
}

// fakeResolver maps "provider:name" to providers by the provider part.
type fakeResolver struct {
	providers map[string]model.Provider
	err       error // returned for every model when set
}

func (r fakeResolver) Resolve(s string) (model.Provider, string, error) {
	if r.err != nil {
		return nil, "", r.err
	}
	prov, name, err := model.ParseName(s)
	if err != nil {
		return nil, "", err
	}
	p, ok := r.providers[prov]
	if !ok {
		return nil, "", fmt.Errorf("unknown model provider %q", prov)
	}
	return p, name, nil
}

func newModelActivities(t *testing.T, provider *fakeProvider) *Activities {
	t.Helper()
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	acts := newActivities(t)
	acts.Transcripts = store
	acts.Models = fakeResolver{providers: map[string]model.Provider{"fake": provider}}
	return acts
}

func callModel(t *testing.T, acts *Activities, in CallModelInput) (CallModelResult, error) {
	t.Helper()
	val, err := newEnv(acts).ExecuteActivity(acts.CallModel, in)
	if err != nil {
		return CallModelResult{}, err
	}
	var res CallModelResult
	require.NoError(t, val.Get(&res))
	return res, nil
}

func texts(msgs []results.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role) + ": " + m.Text()
	}
	return out
}

func TestCallModelTranscriptChain(t *testing.T) {
	provider := &fakeProvider{reply: countingReply}
	acts := newModelActivities(t, provider)
	temp := 0.2
	tools := []model.ToolDef{{Name: "copy", Description: "Copy a file.", Schema: json.RawMessage(`{"type":"object"}`)}}

	// First call: no transcript yet, the messages are the whole conversation.
	first, err := callModel(t, acts, CallModelInput{
		TurnID:   "turn-1",
		Model:    "fake:small-1:latest",
		System:   "Be brief.",
		Messages: []results.Message{results.UserText("hello")},
		Tools:    tools,
		Params:   model.Params{MaxTokens: 100, Temperature: &temp},
	})
	require.NoError(t, err)
	require.NotEmpty(t, first.Transcript)
	require.Equal(t, results.RoleAssistant, first.Response.Message.Role, "the reply is always the assistant's")
	require.Equal(t, "reply 1", first.Response.Message.Text())
	require.Equal(t, model.StopEnd, first.Response.StopReason)
	require.Equal(t, model.Usage{InputTokens: 10, OutputTokens: 2}, first.Response.Usage)

	reqs := provider.calls()
	require.Len(t, reqs, 1)
	require.Equal(t, "small-1:latest", reqs[0].Model, "the provider gets the name without its prefix")
	require.Equal(t, "Be brief.", reqs[0].System)
	require.Equal(t, []string{"user: hello"}, texts(reqs[0].Messages))
	require.Equal(t, tools[0].Name, reqs[0].Tools[0].Name)
	require.Equal(t, 100, reqs[0].Params.MaxTokens)
	require.InDelta(t, 0.2, *reqs[0].Params.Temperature, 1e-9)

	// Second call: only the new messages travel; the provider still gets
	// the whole conversation.
	toolResult := results.Message{Role: results.RoleTool, ToolCallID: "c1", ToolName: "copy", Parts: []results.Part{results.TextPart("copied")}}
	secondIn := CallModelInput{
		TurnID:     "turn-1",
		Model:      "fake:small-1:latest",
		Transcript: first.Transcript,
		Messages:   []results.Message{results.UserText("and again"), toolResult},
	}
	second, err := callModel(t, acts, secondIn)
	require.NoError(t, err)
	require.NotEqual(t, first.Transcript, second.Transcript)
	require.Equal(t, "reply 4", second.Response.Message.Text())

	reqs = provider.calls()
	require.Len(t, reqs, 2)
	require.Equal(t, []string{"user: hello", "assistant: reply 1", "user: and again", "tool: copied"}, texts(reqs[1].Messages))
	require.Equal(t, "c1", reqs[1].Messages[3].ToolCallID)

	// The store holds the whole conversation, reply included.
	stored, err := acts.Transcripts.Load(second.Transcript)
	require.NoError(t, err)
	require.Equal(t, []string{"user: hello", "assistant: reply 1", "user: and again", "tool: copied", "assistant: reply 4"}, texts(stored))

	// The input is only the new messages plus a head: it does not grow
	// with the conversation.
	encoded, err := json.Marshal(secondIn)
	require.NoError(t, err)
	require.NotContains(t, string(encoded), "hello")

	// A retry of the same call stores nothing new and names the same head.
	chunks, _, err := acts.Transcripts.Stats()
	require.NoError(t, err)
	again, err := callModel(t, acts, secondIn)
	require.NoError(t, err)
	require.Equal(t, second.Transcript, again.Transcript)
	chunksAfter, _, err := acts.Transcripts.Stats()
	require.NoError(t, err)
	require.Equal(t, chunks, chunksAfter)
}

func TestCallModelPassesToolCalls(t *testing.T) {
	calls := []results.ToolCall{{ID: "c1", Name: "copy", Arguments: `{"path":"a"}`}, {ID: "c2", Name: "copy", Arguments: `not json`}}
	provider := &fakeProvider{reply: func(model.Request) (model.Response, error) {
		return model.Response{
			Message:    results.Message{Role: results.RoleAssistant, ToolCalls: calls},
			StopReason: model.StopToolCalls,
		}, nil
	}}
	acts := newModelActivities(t, provider)
	res, err := callModel(t, acts, CallModelInput{Model: "fake:m", Messages: []results.Message{results.UserText("copy a")}})
	require.NoError(t, err)
	require.Equal(t, calls, res.Response.Message.ToolCalls)
	require.Equal(t, model.StopToolCalls, res.Response.StopReason)

	stored, err := acts.Transcripts.Load(res.Transcript)
	require.NoError(t, err)
	require.Len(t, stored, 2)
	require.Equal(t, calls, stored[1].ToolCalls)
}

func TestCallModelTranscriptTrouble(t *testing.T) {
	cases := []struct {
		name     string
		head     string
		wantType string // "" means any error that is not TranscriptMissing
	}{
		{name: "unknown head", head: strings.Repeat("ab", 32), wantType: ErrTypeTranscriptMissing},
		{name: "malformed head", head: "not-a-head"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			provider := &fakeProvider{reply: countingReply}
			acts := newModelActivities(t, provider)
			_, err := callModel(t, acts, CallModelInput{Model: "fake:m", Transcript: tc.head, Messages: []results.Message{results.UserText("hi")}})
			appErr := appError(t, err)
			if tc.wantType != "" {
				require.Equal(t, tc.wantType, appErr.Type())
				require.True(t, appErr.NonRetryable(), "the workflow resends the conversation instead of retrying")
			} else {
				require.NotEqual(t, ErrTypeTranscriptMissing, appErr.Type())
				require.Contains(t, err.Error(), "load conversation")
			}
			require.Empty(t, provider.calls(), "the model is not called without the conversation")
		})
	}

	t.Run("store failure", func(t *testing.T) {
		provider := &fakeProvider{reply: countingReply}
		dir := t.TempDir() + "/transcripts"
		store, err := transcript.NewStore(dir)
		require.NoError(t, err)
		acts := newModelActivities(t, provider)
		acts.Transcripts = store
		// Replace the store's directory with a file: nothing can be written
		// (a full or read-only disk; permission bits would not stop root).
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, os.WriteFile(dir, []byte("x"), 0o600))

		// The reply was paid for: it comes back, without a head, instead
		// of an error that would make Temporal call the model again.
		res, err := callModel(t, acts, CallModelInput{TurnID: "turn-1", Model: "fake:m", Messages: []results.Message{results.UserText("hi")}})
		require.NoError(t, err)
		require.Empty(t, res.Transcript, "an empty head says nothing was stored")
		require.Equal(t, "reply 1", res.Response.Message.Text())
		require.Equal(t, results.RoleAssistant, res.Response.Message.Role)
		require.Len(t, provider.calls(), 1, "the model is called exactly once")

		// The workflow then resends the whole conversation with no head;
		// the provider sees all of it, and the store still cannot keep it.
		whole := []results.Message{results.UserText("hi"), res.Response.Message, results.UserText("more")}
		res, err = callModel(t, acts, CallModelInput{TurnID: "turn-1", Model: "fake:m", Messages: whole})
		require.NoError(t, err)
		require.Empty(t, res.Transcript)
		require.Equal(t, "reply 3", res.Response.Message.Text())
		reqs := provider.calls()
		require.Len(t, reqs, 2)
		require.Equal(t, []string{"user: hi", "assistant: reply 1", "user: more"}, texts(reqs[1].Messages))

		// Once the disk recovers, the same resend is stored again and the
		// head names the whole conversation.
		require.NoError(t, os.Remove(dir))
		require.NoError(t, os.Mkdir(dir, 0o700))
		res, err = callModel(t, acts, CallModelInput{TurnID: "turn-1", Model: "fake:m", Messages: whole})
		require.NoError(t, err)
		require.NotEmpty(t, res.Transcript)
		stored, err := store.Load(res.Transcript)
		require.NoError(t, err)
		require.Equal(t, []string{"user: hi", "assistant: reply 1", "user: more", "assistant: reply 3"}, texts(stored))
	})
}

func TestCallModelDamagedTranscript(t *testing.T) {
	cases := map[string]func(t *testing.T, p string){
		"truncated chunk": func(t *testing.T, p string) {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, data[:len(data)-3], 0o600))
		},
		"chunk that does not match its id": func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, []byte(`{"messages":[]}`), 0o600))
		},
		"unreadable chunk": func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o700))
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			provider := &fakeProvider{reply: countingReply}
			dir := t.TempDir()
			store, err := transcript.NewStore(dir)
			require.NoError(t, err)
			acts := newModelActivities(t, provider)
			acts.Transcripts = store

			first, err := callModel(t, acts, CallModelInput{TurnID: "turn-1", Model: "fake:m", Messages: []results.Message{results.UserText("hi")}})
			require.NoError(t, err)
			require.NotEmpty(t, first.Transcript)
			damage(t, filepath.Join(dir, first.Transcript[:2], first.Transcript[2:]+".json"))

			// Reading the damaged chunk again would fail the same way ten
			// times; the workflow's answer to TranscriptMissing is to resend.
			_, err = callModel(t, acts, CallModelInput{TurnID: "turn-1", Model: "fake:m", Transcript: first.Transcript, Messages: []results.Message{results.UserText("next")}})
			appErr := appError(t, err)
			require.Equal(t, ErrTypeTranscriptMissing, appErr.Type())
			require.True(t, appErr.NonRetryable())
			require.Len(t, provider.calls(), 1, "the model is not called without the conversation")

			// The resend works.
			whole := []results.Message{results.UserText("hi"), first.Response.Message, results.UserText("next")}
			res, err := callModel(t, acts, CallModelInput{TurnID: "turn-1", Model: "fake:m", Messages: whole})
			require.NoError(t, err)
			require.NotEmpty(t, res.Transcript)
			require.Equal(t, "reply 3", res.Response.Message.Text())
		})
	}
}

func TestCallModelHeartbeats(t *testing.T) {
	defer func(d time.Duration) { callModelHeartbeatEvery = d }(callModelHeartbeatEvery)
	callModelHeartbeatEvery = 10 * time.Millisecond

	release := make(chan struct{})
	provider := &fakeProvider{reply: func(req model.Request) (model.Response, error) {
		<-release
		return countingReply(req)
	}}
	acts := newModelActivities(t, provider)
	// The SDK batches heartbeats (one per 30 s without a heartbeat
	// timeout), so the listener sees only what reaches the server; the
	// interceptor sees every RecordHeartbeat.
	counter := &heartbeatCounter{}
	env := newEnv(acts, worker.Options{Interceptors: []interceptor.WorkerInterceptor{counter}})
	var sent atomic.Int32
	env.SetOnActivityHeartbeatListener(func(info *activity.Info, _ converter.EncodedValues) {
		if info.ActivityType.Name == CallModelName {
			sent.Add(1)
		}
	})
	go func() {
		// Release the provider once heartbeats have been recorded while it
		// waited (or give up, and let the assertions below fail).
		deadline := time.Now().Add(5 * time.Second)
		for counter.beats.Load() < 3 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		close(release)
	}()
	val, err := env.ExecuteActivity(acts.CallModel, CallModelInput{TurnID: "turn-1", Model: "fake:m", Messages: []results.Message{results.UserText("hi")}})
	require.NoError(t, err)
	var res CallModelResult
	require.NoError(t, val.Get(&res))
	require.Equal(t, "reply 1", res.Response.Message.Text())
	require.GreaterOrEqual(t, counter.beats.Load(), int32(3), "CallModel must keep heartbeating while the provider is slow")
	require.Positive(t, sent.Load(), "a heartbeat must reach the server")

	// The heartbeat stops with the call.
	n := counter.beats.Load()
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, n, counter.beats.Load())
}

// heartbeatCounter counts every RecordHeartbeat an activity makes.
type heartbeatCounter struct {
	interceptor.WorkerInterceptorBase
	beats atomic.Int32
}

func (c *heartbeatCounter) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &heartbeatInbound{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, beats: &c.beats}
}

type heartbeatInbound struct {
	interceptor.ActivityInboundInterceptorBase
	beats *atomic.Int32
}

func (i *heartbeatInbound) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	return i.Next.Init(&heartbeatOutbound{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: outbound}, beats: i.beats})
}

type heartbeatOutbound struct {
	interceptor.ActivityOutboundInterceptorBase
	beats *atomic.Int32
}

func (o *heartbeatOutbound) RecordHeartbeat(ctx context.Context, details ...any) {
	o.beats.Add(1)
	o.Next.RecordHeartbeat(ctx, details...)
}

func TestCallModelHeartbeatTimeout(t *testing.T) {
	// The workflow's heartbeat timeout must leave room for several beats,
	// and the SDK sends one per 80% of it at most.
	require.Equal(t, 4*CallModelHeartbeatInterval, CallModelHeartbeatTimeout)
	require.Less(t, CallModelHeartbeatTimeout, 30*time.Second, "a lost worker is noticed in seconds")
}

func TestCallModelErrors(t *testing.T) {
	cases := []struct {
		name          string
		resolverErr   error // set: the resolver fails
		model         string
		providerErr   error
		wantType      string
		wantRetryable bool
		wantDelay     time.Duration
		wantMessage   []string
	}{
		{
			name:        "bad request",
			providerErr: &model.Error{Status: 400, Message: "messages: field required"},
			wantType:    ErrTypeModelRejected,
			wantMessage: []string{"400", "field required"},
		},
		{
			name:        "authentication failure, wrapped",
			providerErr: fmt.Errorf("anthropic: %w", &model.Error{Status: 401, Message: "invalid x-api-key"}),
			wantType:    ErrTypeModelRejected,
			wantMessage: []string{"401", "invalid x-api-key"},
		},
		{
			name:          "rate limited with Retry-After",
			providerErr:   &model.Error{Retryable: true, Status: 429, RetryAfter: 7 * time.Second, Message: "slow down"},
			wantType:      ErrTypeModelUnavailable,
			wantRetryable: true,
			wantDelay:     7 * time.Second,
			wantMessage:   []string{"429", "slow down"},
		},
		{
			name:        "context length has its own type",
			providerErr: fmt.Errorf("gemini: %w", &model.Error{Status: 400, ContextLength: true, Message: "the conversation is longer than the model's context window"}),
			wantType:    ErrTypeModelContextLength,
			wantMessage: []string{"400", "context window"},
		},
		{
			name:          "server error without Retry-After",
			providerErr:   &model.Error{Retryable: true, Status: 503, Message: "overloaded"},
			wantType:      ErrTypeModelUnavailable,
			wantRetryable: true,
			wantMessage:   []string{"503", "overloaded"},
		},
		{
			name:          "unclassified transport error",
			providerErr:   errors.New("connection reset by peer"),
			wantType:      ErrTypeModelUnavailable,
			wantRetryable: true,
			wantMessage:   []string{"connection reset by peer"},
		},
		{
			name:        "unknown provider",
			model:       "mystery:m",
			wantType:    ErrTypeModelRejected,
			wantMessage: []string{`unknown model provider "mystery"`},
		},
		{
			name:        "malformed model name",
			model:       "no-provider",
			wantType:    ErrTypeModelRejected,
			wantMessage: []string{"provider:name"},
		},
		{
			name:        "resolver error",
			resolverErr: errors.New("OPENAI_API_KEY is not set"),
			wantType:    ErrTypeModelRejected,
			wantMessage: []string{"OPENAI_API_KEY is not set"},
		},
		{
			name:          "resolver error classified as transient",
			resolverErr:   &model.Error{Retryable: true, RetryAfter: time.Second, Message: "discovery endpoint down"},
			wantType:      ErrTypeModelUnavailable,
			wantRetryable: true,
			wantDelay:     time.Second,
			wantMessage:   []string{"discovery endpoint down"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			provider := &fakeProvider{reply: func(model.Request) (model.Response, error) {
				if tc.providerErr != nil {
					return model.Response{}, tc.providerErr
				}
				return countingReply(model.Request{})
			}}
			acts := newModelActivities(t, provider)
			if tc.resolverErr != nil {
				acts.Models = fakeResolver{err: tc.resolverErr}
			}
			name := tc.model
			if name == "" {
				name = "fake:m"
			}
			_, err := callModel(t, acts, CallModelInput{Model: name, Messages: []results.Message{results.UserText("hi")}})
			appErr := appError(t, err)
			require.Equal(t, tc.wantType, appErr.Type())
			require.Equal(t, tc.wantRetryable, !appErr.NonRetryable())
			require.Equal(t, tc.wantDelay, appErr.NextRetryDelay())
			for _, w := range tc.wantMessage {
				require.Contains(t, err.Error(), w)
			}
			chunks, _, err := acts.Transcripts.Stats()
			require.NoError(t, err)
			require.Zero(t, chunks, "a failed call stores nothing")
		})
	}
}
