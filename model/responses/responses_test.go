package responses

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/fakeapi"
	"github.com/tollgate-dev/tollgate/results"
)

const fakeKey = "sk-proj-DO-NOT-LEAK-0123456789abcdef"

func provider(srv *fakeapi.Server) *Provider {
	return New(Config{APIKey: fakeKey, BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
}

func request() model.Request {
	return model.Request{Model: "gpt-4.1", System: "Be brief.", Messages: fakeapi.Conversation(), Tools: fakeapi.Tools()}
}

// Written from the API reference's Response object.
const textReply = `{
  "id": "resp_67ccd2bed1ec8190b14f964abc054267",
  "object": "response",
  "created_at": 1741476542,
  "status": "completed",
  "error": null,
  "incomplete_details": null,
  "instructions": "Be brief.",
  "model": "gpt-4.1-2025-04-14",
  "output": [
    {"type": "message", "id": "msg_67ccd2bf17f0", "status": "completed", "role": "assistant",
     "content": [{"type": "output_text", "text": "The chart shows growth.", "annotations": []}]}
  ],
  "parallel_tool_calls": true,
  "store": false,
  "tools": [],
  "usage": {"input_tokens": 328, "input_tokens_details": {"cached_tokens": 256}, "output_tokens": 12, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 340}
}`

const callsReply = `{
  "id": "resp_2", "object": "response", "created_at": 1741476543, "status": "completed",
  "error": null, "incomplete_details": null, "model": "gpt-4.1",
  "output": [
    {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "screenshot", "arguments": "{\"window\":\"main\"}", "status": "completed"},
    {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "fetch", "arguments": "{\"url\":\"https://example.com\"}", "status": "completed"}
  ],
  "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 140}
}`

func TestText(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: textReply})
	resp, err := provider(srv).Complete(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, "The chart shows growth.", resp.Message.Text())
	require.Equal(t, model.StopEnd, resp.StopReason)
	require.Equal(t, model.Usage{InputTokens: 328, OutputTokens: 12, CachedTokens: 256}, resp.Usage)

	got := srv.Last(t)
	require.Equal(t, "/v1/responses", got.Path)
	require.Equal(t, "Bearer "+fakeKey, got.Header.Get("Authorization"))
	body := got.JSON(t)
	require.Equal(t, "gpt-4.1", body["model"])
	require.Equal(t, "Be brief.", body["instructions"])
	require.Equal(t, false, body["store"])
	require.Nil(t, body["stream"])
	tools := body["tools"].([]any)
	require.Len(t, tools, 2)
	require.Equal(t, "function", tools[0].(map[string]any)["type"])
	require.Equal(t, "screenshot", tools[0].(map[string]any)["name"])
}

func TestParallelToolCalls(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: callsReply})
	resp, err := provider(srv).Complete(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, model.StopToolCalls, resp.StopReason)
	require.Equal(t, []results.ToolCall{
		{ID: "call_a", Name: "screenshot", Arguments: `{"window":"main"}`},
		{ID: "call_b", Name: "fetch", Arguments: `{"url":"https://example.com"}`},
	}, resp.Message.ToolCalls)
}

// TestMediaInToolResult proves where a SucceedParts(text, image, text)
// outcome lands: inside its function_call_output, in order, and that a
// refused type becomes a sentence there.
func TestMediaInToolResult(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: textReply})
	_, err := provider(srv).Complete(context.Background(), request())
	require.NoError(t, err)
	input, err := json.Marshal(srv.Last(t).JSON(t)["input"])
	require.NoError(t, err)
	require.JSONEq(t, `[
	  {"role": "user", "content": "Show me the chart."},
	  {"role": "assistant", "content": "Looking."},
	  {"type": "function_call", "call_id": "call_1", "name": "screenshot", "arguments": "{\"window\":\"main\"}"},
	  {"type": "function_call", "call_id": "call_2", "name": "fetch", "arguments": "{\"url\":\"https://example.com/a\"}"},
	  {"type": "function_call_output", "call_id": "call_1", "output": [
	    {"type": "input_text", "text": "before the chart"},
	    {"type": "input_image", "image_url": "data:image/png;base64,`+fakeapi.PNGBase64+`"},
	    {"type": "input_text", "text": "after the chart"}
	  ]},
	  {"type": "function_call_output", "call_id": "call_2", "output": [
	    {"type": "input_text", "text": "the page is attached"},
	    {"type": "input_text", "text": "[`+fakeapi.RefusedType+` not shown: OpenAI Responses accepts PNG, JPEG, WebP and GIF images and PDF files only]"}
	  ]}
	]`, string(input))
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
			name: "429 with Retry-After",
			reply: fakeapi.Reply{Status: 429, Header: map[string]string{"Retry-After": "3"},
				Body: `{"error":{"message":"Rate limit reached for gpt-4.1 on tokens per min (TPM).","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`},
			retryable: true, after: 3 * time.Second, contains: "rate limited",
		},
		{
			name: "context length",
			reply: fakeapi.Reply{Status: 400,
				Body: `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`},
			context: true, contains: "context window",
		},
		{
			name: "401 is not retried",
			reply: fakeapi.Reply{Status: 401,
				Body: `{"error":{"message":"Incorrect API key provided: ` + fakeKey + `.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
			contains: "authentication failed",
		},
		{
			name:      "500 retries",
			reply:     fakeapi.Reply{Status: 500, Body: `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`},
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
			require.NotContains(t, err.Error(), fakeKey)
			require.Len(t, srv.Requests(), 1, "the SDK does not retry behind Temporal")
		})
	}
}

func TestMissingKey(t *testing.T) {
	_, err := New(Config{}).Complete(context.Background(), request())
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.False(t, me.Retryable)
	require.Contains(t, me.Message, KeyVar)
}

// Written from the API reference's streaming events.
var streamEvents = fakeapi.SSE(
	[2]string{"response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_s","object":"response","status":"in_progress","output":[]}}`},
	[2]string{"response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]}}`},
	[2]string{"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Let me "}`},
	[2]string{"response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"look."}`},
	[2]string{"response.output_item.added", `{"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_a","name":"screenshot","arguments":"","status":"in_progress"}}`},
	[2]string{"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_1","output_index":1,"delta":"{\"window\":"}`},
	[2]string{"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_1","output_index":1,"delta":"\"main\"}"}`},
	[2]string{"response.completed", `{"type":"response.completed","sequence_number":7,"response":{"id":"resp_s","object":"response","status":"completed","error":null,"incomplete_details":null,"model":"gpt-4.1",
	  "output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me look.","annotations":[]}]},
	            {"type":"function_call","id":"fc_1","call_id":"call_a","name":"screenshot","arguments":"{\"window\":\"main\"}","status":"completed"}],
	  "usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":10},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":59}}}`},
)

func TestStreaming(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{ContentType: "text/event-stream", Chunks: streamEvents})
	var deltas []model.Delta
	ctx := model.WithStream(context.Background(), func(d model.Delta) { deltas = append(deltas, d) })
	resp, err := provider(srv).Complete(ctx, request())
	require.NoError(t, err)
	require.Equal(t, true, srv.Last(t).JSON(t)["stream"])
	require.Equal(t, []model.Delta{
		{Kind: model.DeltaText, Text: "Let me "},
		{Kind: model.DeltaText, Text: "look."},
		{Kind: model.DeltaToolCall, Index: 0, ToolCallID: "call_a", ToolName: "screenshot"},
		{Kind: model.DeltaToolCall, Index: 0, Arguments: `{"window":`},
		{Kind: model.DeltaToolCall, Index: 0, Arguments: `"main"}`},
	}, deltas)
	require.Equal(t, "Let me look.", resp.Message.Text())
	require.Equal(t, []results.ToolCall{{ID: "call_a", Name: "screenshot", Arguments: `{"window":"main"}`}}, resp.Message.ToolCalls)
	require.Equal(t, model.Usage{InputTokens: 50, OutputTokens: 9, CachedTokens: 10}, resp.Usage)
}

func TestStreamErrorEvent(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{ContentType: "text/event-stream", Chunks: fakeapi.SSE(
		[2]string{"error", `{"type":"error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model.","param":null,"sequence_number":1}`},
	)})
	ctx := model.WithStream(context.Background(), func(model.Delta) {})
	_, err := provider(srv).Complete(ctx, request())
	require.ErrorIs(t, err, model.ErrContextLength)
}

func TestStreamRateLimited(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "2"},
		Body: `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`})
	ctx := model.WithStream(context.Background(), func(model.Delta) {})
	_, err := provider(srv).Complete(ctx, request())
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.True(t, me.Retryable)
	require.Equal(t, 2*time.Second, me.RetryAfter)
}
