package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

// sseServer streams the given (event, data) pairs the way the Messages
// API does, one flush per event, and records the request body.
func sseServer(t *testing.T, events [][2]string) (*httptest.Server, *[]byte) {
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
			_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e[0], e[1])
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &body
}

var streamedParallel = [][2]string{
	{"message_start", `{"type":"message_start","message":{"id":"msg_s1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":40,"cache_read_input_tokens":2,"output_tokens":1}}}`},
	{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
	{"ping", `{"type":"ping"}`},
	{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Reading "}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"both."}}`},
	{"content_block_stop", `{"type":"content_block_stop","index":0}`},
	{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_a","name":"read_file","input":{}}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}`},
	{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"a.txt\"}"}}`},
	{"content_block_stop", `{"type":"content_block_stop","index":1}`},
	{"content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_b","name":"list_dir","input":{}}}`},
	{"content_block_stop", `{"type":"content_block_stop","index":2}`},
	{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":17}}`},
	{"message_stop", `{"type":"message_stop"}`},
}

const unstreamedParallel = `{"id":"msg_s1","type":"message","role":"assistant","model":"claude-test",
 "content":[{"type":"text","text":"Reading both."},
            {"type":"tool_use","id":"toolu_a","name":"read_file","input":{"path":"a.txt"}},
            {"type":"tool_use","id":"toolu_b","name":"list_dir","input":{}}],
 "stop_reason":"tool_use","usage":{"input_tokens":40,"cache_read_input_tokens":2,"output_tokens":17}}`

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
	req := model.Request{Model: "claude-test", Messages: []results.Message{results.UserText("read a.txt and list .")}}
	want, err := newServer(t, http.StatusOK, unstreamedParallel, nil).provider(fakeKey).Complete(context.Background(), req)
	require.NoError(t, err)

	srv, body := sseServer(t, streamedParallel)
	p := New(Config{APIKey: fakeKey, BaseURL: srv.URL, HTTPClient: srv.Client()})
	ctx, deltas := collect(context.Background())
	got, err := p.Complete(ctx, req)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, model.Usage{InputTokens: 42, OutputTokens: 17, CachedTokens: 2}, got.Usage)
	require.Equal(t, model.StopToolCalls, got.StopReason)

	var sent map[string]any
	require.NoError(t, json.Unmarshal(*body, &sent))
	require.Equal(t, true, sent["stream"])
	require.Equal(t, []model.Delta{
		{Kind: model.DeltaText, Text: "Reading "},
		{Kind: model.DeltaText, Text: "both."},
		{Kind: model.DeltaToolCall, Index: 0, ToolCallID: "toolu_a", ToolName: "read_file"},
		{Kind: model.DeltaToolCall, Index: 0, Arguments: `{"path":`},
		{Kind: model.DeltaToolCall, Index: 0, Arguments: `"a.txt"}`},
		{Kind: model.DeltaToolCall, Index: 1, ToolCallID: "toolu_b", ToolName: "list_dir"},
	}, deltas())
}

func TestStreamWithoutListenerUsesThePlainAPI(t *testing.T) {
	srv := newServer(t, http.StatusOK, unstreamedParallel, nil)
	_, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "m", Messages: []results.Message{results.UserText("hi")}})
	require.NoError(t, err)
	_, streamed := srv.sent(t)["stream"]
	require.False(t, streamed)
}

func TestStreamFailuresAreRetryableAndCarryNoKey(t *testing.T) {
	for name, events := range map[string][][2]string{
		"error event": {
			streamedParallel[0], streamedParallel[1], streamedParallel[3],
			{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded ` + fakeKey + `"}}`},
		},
		"cut off before message_stop": streamedParallel[:5],
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := sseServer(t, events)
			p := New(Config{APIKey: fakeKey, BaseURL: srv.URL, HTTPClient: srv.Client()})
			ctx, deltas := collect(context.Background())
			_, err := p.Complete(ctx, model.Request{Model: "m", Messages: []results.Message{results.UserText("x")}})
			require.Error(t, err)
			e := model.AsError(err)
			require.True(t, e.Retryable, e.Error())
			require.NotContains(t, e.Error(), fakeKey)
			require.NotEmpty(t, deltas())
		})
	}
}
