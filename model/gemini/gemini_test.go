package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/fakeapi"
	"github.com/tollgate-dev/tollgate/results"
)

const fakeKey = "AIzaSyDO-NOT-LEAK-0123456789abcdefghijk"

func provider(srv *fakeapi.Server) *Provider {
	return New(Config{APIKey: fakeKey, BaseURL: srv.URL, HTTPClient: srv.Client()})
}

func request() model.Request {
	return model.Request{Model: "gemini-2.5-flash", System: "Be brief.", Messages: fakeapi.Conversation(), Tools: fakeapi.Tools()}
}

// Written from the API reference's GenerateContentResponse.
const textReply = `{
  "candidates": [{"content": {"parts": [{"text": "The chart shows growth."}], "role": "model"}, "finishReason": "STOP", "index": 0}],
  "usageMetadata": {"promptTokenCount": 300, "candidatesTokenCount": 10, "thoughtsTokenCount": 4, "cachedContentTokenCount": 200, "totalTokenCount": 314},
  "modelVersion": "gemini-2.5-flash",
  "responseId": "resp-abc"
}`

const callsReply = `{
  "candidates": [{"content": {"parts": [
      {"functionCall": {"name": "screenshot", "args": {"window": "main"}}, "thoughtSignature": "c2lnbmF0dXJl"},
      {"functionCall": {"name": "fetch", "args": {"url": "https://example.com"}}}
    ], "role": "model"}, "finishReason": "STOP", "index": 0}],
  "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120},
  "responseId": "resp-calls"
}`

func TestText(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: textReply})
	resp, err := provider(srv).Complete(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, "The chart shows growth.", resp.Message.Text())
	require.Equal(t, model.StopEnd, resp.StopReason)
	require.Equal(t, model.Usage{InputTokens: 300, OutputTokens: 14, CachedTokens: 200}, resp.Usage)

	got := srv.Last(t)
	require.Equal(t, "/v1beta/models/gemini-2.5-flash:generateContent", got.Path)
	require.Equal(t, fakeKey, got.Header.Get("X-Goog-Api-Key"))
	body := got.JSON(t)
	sys, _ := json.Marshal(body["systemInstruction"])
	require.JSONEq(t, `{"role":"user","parts":[{"text":"Be brief."}]}`, string(sys))
	tools, _ := json.Marshal(body["tools"])
	require.JSONEq(t, `[{"functionDeclarations":[
	  {"name":"screenshot","description":"Capture a window.","parametersJsonSchema":{"type":"object","properties":{"window":{"type":"string"}},"required":["window"]}},
	  {"name":"fetch","description":"Fetch a URL.","parametersJsonSchema":{"type":"object","properties":{"url":{"type":"string"}}}}
	]}]`, string(tools))
}

func TestParallelToolCalls(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: callsReply})
	resp, err := provider(srv).Complete(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, model.StopToolCalls, resp.StopReason)
	require.Equal(t, []results.ToolCall{
		{ID: "gemini_resp-calls_0", Name: "screenshot", Arguments: `{"window":"main"}`},
		{ID: "gemini_resp-calls_1", Name: "fetch", Arguments: `{"url":"https://example.com"}`},
	}, resp.Message.ToolCalls)

	// The same reply gives the same IDs, so a retried activity agrees.
	again, err := provider(srv).Complete(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, resp.Message.ToolCalls, again.Message.ToolCalls)
}

// TestMediaInToolResult proves where a SucceedParts(text, image, text)
// outcome lands: text in the function response's output list, the image
// in its parts, referred to from the list at its place.
func TestMediaInToolResult(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: textReply})
	_, err := provider(srv).Complete(context.Background(), request())
	require.NoError(t, err)
	contents, _ := json.Marshal(srv.Last(t).JSON(t)["contents"])
	require.JSONEq(t, `[
	  {"role": "user", "parts": [{"text": "Show me the chart."}]},
	  {"role": "model", "parts": [
	    {"text": "Looking."},
	    {"functionCall": {"id": "call_1", "name": "screenshot", "args": {"window": "main"}}, "thoughtSignature": "skip/thought/signature/validator"},
	    {"functionCall": {"id": "call_2", "name": "fetch", "args": {"url": "https://example.com/a"}}}
	  ]},
	  {"role": "user", "parts": [
	    {"functionResponse": {"id": "call_1", "name": "screenshot",
	      "response": {"output": ["before the chart", {"$ref": "call_1_1"}, "after the chart"]},
	      "parts": [{"inlineData": {"mimeType": "image/png", "data": "`+fakeapi.PNGBase64+`", "displayName": "call_1_1"}}]}},
	    {"functionResponse": {"id": "call_2", "name": "fetch",
	      "response": {"output": ["the page is attached", "[`+fakeapi.RefusedType+` not shown: Gemini accepts PNG, JPEG and WebP images, PDF and plain text in tool results, and also audio and video from the user]"]}}}
	  ]}
	]`, string(contents))
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
				Body: `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`},
			retryable: true, after: 3 * time.Second, contains: "rate limited",
		},
		{
			name: "429 with RetryInfo",
			reply: fakeapi.Reply{Status: 429,
				Body: `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"21s"}]}}`},
			retryable: true, after: 21 * time.Second, contains: "rate limited",
		},
		{
			name: "context length",
			reply: fakeapi.Reply{Status: 400,
				Body: `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`},
			context: true, contains: "context window",
		},
		{
			name: "bad key is not retried",
			reply: fakeapi.Reply{Status: 400,
				Body: `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`},
			contains: "API key not valid",
		},
		{
			name:      "503 retries",
			reply:     fakeapi.Reply{Status: 503, Body: `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`},
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
	t.Setenv("GEMINI_API_KEY", "")
	t.Setenv("GOOGLE_API_KEY", "")
	_, err := New(Config{}).Complete(context.Background(), request())
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.False(t, me.Retryable)
	require.Contains(t, me.Message, KeyVar)
}

type staticToken struct{}

func (staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: "vertex-token", Type: "Bearer"}, nil
}

type countingTransport struct{ n int }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n++
	return http.DefaultTransport.RoundTrip(r)
}

func TestVertex(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: textReply})
	tr := &countingTransport{}
	p := New(Config{
		Vertex: true, Project: "my-project", Location: "us-central1", BaseURL: srv.URL,
		Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken{}}),
		Transport:   tr,
	})
	resp, err := p.Complete(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, "The chart shows growth.", resp.Message.Text())
	got := srv.Last(t)
	require.Equal(t, "/v1beta1/projects/my-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent", got.Path)
	require.Equal(t, "Bearer vertex-token", got.Header.Get("Authorization"))
	require.Equal(t, 1, tr.n, "the authenticating client sends through the given transport")
}

// Written from the API reference: streamGenerateContent with alt=sse
// sends one GenerateContentResponse per event, each on one data line.
var streamEvents = fakeapi.SSE(
	[2]string{"", `{"candidates":[{"content":{"parts":[{"text":"Let me "}],"role":"model"},"index":0}],"responseId":"resp-s"}`},
	[2]string{"", `{"candidates":[{"content":{"parts":[{"text":"look."}],"role":"model"},"index":0}],"responseId":"resp-s"}`},
	[2]string{"", `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"screenshot","args":{"window":"main"}}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":9,"cachedContentTokenCount":10,"totalTokenCount":59},"responseId":"resp-s"}`},
)

func TestStreaming(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{ContentType: "text/event-stream", Chunks: streamEvents})
	var deltas []model.Delta
	ctx := model.WithStream(context.Background(), func(d model.Delta) { deltas = append(deltas, d) })
	resp, err := provider(srv).Complete(ctx, request())
	require.NoError(t, err)
	got := srv.Last(t)
	require.Equal(t, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", got.Path)
	require.Equal(t, "alt=sse", got.Query)
	require.Equal(t, []model.Delta{
		{Kind: model.DeltaText, Text: "Let me "},
		{Kind: model.DeltaText, Text: "look."},
		{Kind: model.DeltaToolCall, Index: 0, ToolCallID: "gemini_resp-s_0", ToolName: "screenshot", Arguments: `{"window":"main"}`},
	}, deltas)
	require.Equal(t, "Let me look.", resp.Message.Text())
	require.Equal(t, []results.ToolCall{{ID: "gemini_resp-s_0", Name: "screenshot", Arguments: `{"window":"main"}`}}, resp.Message.ToolCalls)
	require.Equal(t, model.StopToolCalls, resp.StopReason)
	require.Equal(t, model.Usage{InputTokens: 50, OutputTokens: 9, CachedTokens: 10}, resp.Usage)
}

func TestStreamRateLimited(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Status: 429, Header: map[string]string{"Retry-After": "2"},
		Body: `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`})
	ctx := model.WithStream(context.Background(), func(model.Delta) {})
	_, err := provider(srv).Complete(ctx, request())
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.True(t, me.Retryable)
	require.Equal(t, 2*time.Second, me.RetryAfter)
}
