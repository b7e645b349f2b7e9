package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/fakeapi"
	"github.com/tollgate-dev/tollgate/results"
)

func provider(srv *fakeapi.Server) *Provider {
	return New(Config{BaseURL: srv.URL, HTTPClient: srv.Client()})
}

// line compacts a reply: Ollama answers on one line even when it does
// not stream, and its client reads line by line.
func line(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic(err)
	}
	return b.String() + "\n"
}

func request() model.Request {
	return model.Request{Model: "qwen3:8b", System: "Be brief.", Messages: fakeapi.Conversation(), Tools: fakeapi.Tools(), Params: model.Params{MaxTokens: 256}}
}

// Written from Ollama's API reference (POST /api/chat, non-streaming).
const textReply = `{
  "model": "qwen3:8b",
  "created_at": "2026-12-02T10:00:00.000000Z",
  "message": {"role": "assistant", "content": "The chart shows growth."},
  "done": true,
  "done_reason": "stop",
  "total_duration": 5191566416,
  "load_duration": 2154458,
  "prompt_eval_count": 26,
  "prompt_eval_duration": 383809000,
  "eval_count": 8,
  "eval_duration": 4799921000
}`

const callsReply = `{
  "model": "qwen3:8b",
  "created_at": "2026-12-02T10:00:01.000000Z",
  "message": {"role": "assistant", "content": "", "tool_calls": [
    {"function": {"name": "screenshot", "arguments": {"window": "main"}}},
    {"function": {"name": "fetch", "arguments": {"url": "https://example.com"}}}
  ]},
  "done": true,
  "done_reason": "stop",
  "prompt_eval_count": 40,
  "eval_count": 20
}`

func TestText(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: line(textReply)})
	resp, err := provider(srv).Complete(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, "The chart shows growth.", resp.Message.Text())
	require.Equal(t, model.StopEnd, resp.StopReason)
	require.Equal(t, model.Usage{InputTokens: 26, OutputTokens: 8}, resp.Usage)

	got := srv.Last(t)
	require.Equal(t, "/api/chat", got.Path)
	body := got.JSON(t)
	require.Equal(t, false, body["stream"])
	require.Equal(t, false, body["truncate"], "a long conversation is an error, not cut silently")
	require.Equal(t, map[string]any{"num_predict": float64(256)}, body["options"])
	tools, _ := json.Marshal(body["tools"])
	require.JSONEq(t, `[
	  {"type":"function","function":{"name":"screenshot","description":"Capture a window.","parameters":{"type":"object","required":["window"],"properties":{"window":{"type":"string"}}}}},
	  {"type":"function","function":{"name":"fetch","description":"Fetch a URL.","parameters":{"type":"object","properties":{"url":{"type":"string"}}}}}
	]`, string(tools))
}

func TestParallelToolCalls(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: line(callsReply)})
	resp, err := provider(srv).Complete(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, model.StopToolCalls, resp.StopReason)
	require.Len(t, resp.Message.ToolCalls, 2)
	require.Equal(t, "screenshot", resp.Message.ToolCalls[0].Name)
	require.JSONEq(t, `{"window":"main"}`, resp.Message.ToolCalls[0].Arguments)
	require.Equal(t, "fetch", resp.Message.ToolCalls[1].Name)
	require.NotEqual(t, resp.Message.ToolCalls[0].ID, resp.Message.ToolCalls[1].ID)

	again, err := provider(srv).Complete(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, resp.Message.ToolCalls, again.Message.ToolCalls, "the same reply gives the same IDs")
}

// TestMediaInToolResult proves where a SucceedParts(text, image, text)
// outcome lands: the image in the tool message's images, its place marked
// in the content between the two texts.
func TestMediaInToolResult(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: line(textReply)})
	_, err := provider(srv).Complete(context.Background(), request())
	require.NoError(t, err)
	messages, _ := json.Marshal(srv.Last(t).JSON(t)["messages"])
	require.JSONEq(t, `[
	  {"role": "system", "content": "Be brief."},
	  {"role": "user", "content": "Show me the chart."},
	  {"role": "assistant", "content": "Looking.", "tool_calls": [
	    {"id": "call_1", "function": {"index": 0, "name": "screenshot", "arguments": {"window": "main"}}},
	    {"id": "call_2", "function": {"index": 1, "name": "fetch", "arguments": {"url": "https://example.com/a"}}}
	  ]},
	  {"role": "tool", "tool_name": "screenshot", "tool_call_id": "call_1",
	   "content": "before the chart\n[image 1]\nafter the chart", "images": ["`+fakeapi.PNGBase64+`"]},
	  {"role": "tool", "tool_name": "fetch", "tool_call_id": "call_2",
	   "content": "the page is attached\n[`+fakeapi.RefusedType+` not shown: Ollama accepts PNG and JPEG images only]"}
	]`, string(messages))
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name      string
		reply     fakeapi.Reply
		retryable bool
		after     time.Duration
		context   bool
		contains  string
	}{
		{
			name:      "429 with Retry-After",
			reply:     fakeapi.Reply{Status: 429, Header: map[string]string{"Retry-After": "3"}, Body: `{"error":"too many requests"}`},
			retryable: true, after: 3 * time.Second, contains: "rate limited",
		},
		{
			name:    "context length",
			reply:   fakeapi.Reply{Status: 500, Body: `{"error":"the input length exceeds the context length"}`},
			context: true, contains: "context window",
		},
		{
			name:     "unknown model is not retried",
			reply:    fakeapi.Reply{Status: 404, Body: `{"error":"model \"qwen3:8b\" not found, try pulling it first"}`},
			contains: "not found",
		},
		{
			name:      "503 retries",
			reply:     fakeapi.Reply{Status: 503, Body: `{"error":"server busy, please try again.  maximum pending requests exceeded"}`},
			retryable: true, contains: "server error",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeapi.New(t, tc.reply)
			_, err := provider(srv).Complete(context.Background(), request())
			var me *model.Error
			require.ErrorAs(t, err, &me)
			require.Equal(t, tc.retryable, me.Retryable)
			require.Equal(t, tc.after, me.RetryAfter)
			require.Equal(t, tc.context, errors.Is(err, model.ErrContextLength))
			require.Contains(t, me.Message, tc.contains)
			require.Len(t, srv.Requests(), 1)
		})
	}
}

func TestBadBaseURL(t *testing.T) {
	_, err := New(Config{BaseURL: "localhost:11434"}).Complete(context.Background(), request())
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.False(t, me.Retryable)
}

// Written from Ollama's API reference: a streamed chat is one JSON object
// per line, the last with done and the counts.
var streamLines = []string{
	`{"model":"qwen3:8b","created_at":"2026-12-02T10:00:00Z","message":{"role":"assistant","content":"Let me "},"done":false}` + "\n",
	`{"model":"qwen3:8b","created_at":"2026-12-02T10:00:00Z","message":{"role":"assistant","content":"look."},"done":false}` + "\n",
	`{"model":"qwen3:8b","created_at":"2026-12-02T10:00:01Z","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_x","function":{"index":0,"name":"screenshot","arguments":{"window":"main"}}}]},"done":false}` + "\n",
	`{"model":"qwen3:8b","created_at":"2026-12-02T10:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":50,"eval_count":9}` + "\n",
}

func TestStreaming(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{ContentType: "application/x-ndjson", Chunks: streamLines})
	var deltas []model.Delta
	ctx := model.WithStream(context.Background(), func(d model.Delta) { deltas = append(deltas, d) })
	resp, err := provider(srv).Complete(ctx, request())
	require.NoError(t, err)
	require.Equal(t, true, srv.Last(t).JSON(t)["stream"])
	require.Equal(t, []model.Delta{
		{Kind: model.DeltaText, Text: "Let me "},
		{Kind: model.DeltaText, Text: "look."},
		{Kind: model.DeltaToolCall, Index: 0, ToolCallID: "call_x", ToolName: "screenshot", Arguments: `{"window":"main"}`},
	}, deltas)
	require.Equal(t, "Let me look.", resp.Message.Text())
	require.Equal(t, []results.ToolCall{{ID: "call_x", Name: "screenshot", Arguments: `{"window":"main"}`}}, resp.Message.ToolCalls)
	require.Equal(t, model.StopToolCalls, resp.StopReason)
	require.Equal(t, model.Usage{InputTokens: 50, OutputTokens: 9}, resp.Usage)
}

func TestStreamErrorLine(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{ContentType: "application/x-ndjson", Chunks: []string{
		`{"error":"the input length exceeds the context length"}` + "\n",
	}})
	ctx := model.WithStream(context.Background(), func(model.Delta) {})
	_, err := provider(srv).Complete(ctx, request())
	require.ErrorIs(t, err, model.ErrContextLength)
}
