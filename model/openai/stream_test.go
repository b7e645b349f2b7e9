package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

// sseServer answers every request with the given Server-Sent Events, one
// flush per event, the way Chat Completions streams, and records the body.
func sseServer(t *testing.T, events []string) (*httptest.Server, *[]byte) {
	t.Helper()
	var mu sync.Mutex
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		body = b
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			_, _ = fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &body
}

var streamedParallel = []string{
	`{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Reading "},"finish_reason":null}]}`,
	`{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"both."},"finish_reason":null}]}`,
	`{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}`,
	`{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"list_dir","arguments":"{\"pa"}}]},"finish_reason":null}]}`,
	`{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"a.txt\"}"}}]},"finish_reason":null}]}`,
	`{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"th\":\".\"}"}}]},"finish_reason":null}]}`,
	`{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`{"id":"chatcmpl-s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":12,"total_tokens":43}}`,
	`[DONE]`,
}

// The same reply as streamedParallel, unstreamed.
const unstreamedParallel = `{"id":"chatcmpl-s1","object":"chat.completion","created":1,"model":"m",
 "choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Reading both.",
  "tool_calls":[{"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.txt\"}"}},
                {"id":"call_b","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}}]}}],
 "usage":{"prompt_tokens":31,"completion_tokens":12,"total_tokens":43}}`

func collect(ctx context.Context) (context.Context, func() []model.Delta) {
	var mu sync.Mutex
	var got []model.Delta
	return model.WithStream(ctx, func(d model.Delta) {
			mu.Lock()
			got = append(got, d)
			mu.Unlock()
		}), func() []model.Delta {
			mu.Lock()
			defer mu.Unlock()
			return append([]model.Delta(nil), got...)
		}
}

func TestStreamReturnsTheSameResponseAsTheUnstreamedCall(t *testing.T) {
	req := model.Request{Model: "gpt-test", Messages: []results.Message{results.UserText("read a.txt and list .")}}

	plain := newServer(t, http.StatusOK, unstreamedParallel, nil)
	want, err := plain.provider(fakeKey).Complete(context.Background(), req)
	require.NoError(t, err)

	srv, body := sseServer(t, streamedParallel)
	p := New(Config{APIKey: fakeKey, BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
	ctx, deltas := collect(context.Background())
	got, err := p.Complete(ctx, req)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, model.StopToolCalls, got.StopReason)
	require.Equal(t, model.Usage{InputTokens: 31, OutputTokens: 12}, got.Usage)

	var sent map[string]any
	require.NoError(t, json.Unmarshal(*body, &sent))
	require.Equal(t, true, sent["stream"])
	require.Equal(t, map[string]any{"include_usage": true}, sent["stream_options"])

	require.Equal(t, []model.Delta{
		{Kind: model.DeltaText, Text: "Reading "},
		{Kind: model.DeltaText, Text: "both."},
		{Kind: model.DeltaToolCall, Index: 0, ToolCallID: "call_a", ToolName: "read_file"},
		{Kind: model.DeltaToolCall, Index: 1, ToolCallID: "call_b", ToolName: "list_dir", Arguments: `{"pa`},
		{Kind: model.DeltaToolCall, Index: 0, Arguments: `{"path":"a.txt"}`},
		{Kind: model.DeltaToolCall, Index: 1, Arguments: `th":"."}`},
	}, deltas())
}

func TestStreamWithoutListenerUsesThePlainAPI(t *testing.T) {
	plain := newServer(t, http.StatusOK, unstreamedParallel, nil)
	_, err := plain.provider(fakeKey).Complete(context.Background(), model.Request{Model: "m", Messages: []results.Message{results.UserText("hi")}})
	require.NoError(t, err)
	_, streamed := plain.sent(t)["stream"]
	require.False(t, streamed, "nobody listens, so the request must not ask for a stream")
}

func TestStreamCallsWithoutIDsGetDistinctStableIDs(t *testing.T) {
	reply := func(args string) []string {
		return []string{
			`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":` + args + `}}]}}]}`,
			`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`[DONE]`,
		}
	}
	ids := map[string]bool{}
	for _, args := range []string{`"{\"a\":1}"`, `"{\"a\":2}"`, `"{\"a\":1}"`} {
		srv, _ := sseServer(t, reply(args))
		p := New(Config{BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
		ctx, _ := collect(context.Background())
		got, err := p.Complete(ctx, model.Request{Model: "m", Messages: []results.Message{results.UserText("x")}})
		require.NoError(t, err)
		require.Len(t, got.Message.ToolCalls, 1)
		require.Equal(t, model.StopToolCalls, got.StopReason)
		ids[got.Message.ToolCalls[0].ID] = true
	}
	require.Len(t, ids, 2, "different replies get different ids, the same reply the same one")
}

func TestStreamErrorsAreRetryableAndCarryNoKey(t *testing.T) {
	for name, events := range map[string][]string{
		"error event": {
			`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hal"}}]}`,
			`{"error":{"message":"upstream overloaded ` + fakeKey + `","code":502}}`,
		},
		"cut off": {
			`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hal"}}]}`,
			`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"cont`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := sseServer(t, events)
			p := New(Config{APIKey: fakeKey, BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
			ctx, deltas := collect(context.Background())
			_, err := p.Complete(ctx, model.Request{Model: "m", Messages: []results.Message{results.UserText("x")}})
			require.Error(t, err)
			e := model.AsError(err)
			require.True(t, e.Retryable, e.Error())
			require.NotContains(t, e.Error(), fakeKey)
			require.Equal(t, []model.Delta{{Kind: model.DeltaText, Text: "Hal"}}, deltas())
		})
	}
}

func TestStreamHTTPErrorIsClassifiedAsBefore(t *testing.T) {
	srv := newServer(t, http.StatusTooManyRequests, `{"error":{"message":"slow down"}}`, map[string]string{"Retry-After": "7"})
	ctx, _ := collect(context.Background())
	_, err := srv.provider(fakeKey).Complete(ctx, model.Request{Model: "m", Messages: []results.Message{results.UserText("x")}})
	e := model.AsError(err)
	require.True(t, e.Retryable)
	require.Equal(t, 429, e.Status)
	require.True(t, strings.Contains(e.Error(), "slow down"), e.Error())
}
