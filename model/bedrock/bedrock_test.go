package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/fakeapi"
	"github.com/tollgate-dev/tollgate/results"
)

const modelID = "anthropic.claude-sonnet-4-5-20250929-v1:0"

func provider(t *testing.T, srv *fakeapi.Server) *Provider {
	// Keep the machine's own AWS files out of the default chain.
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	return New(Config{
		Region: "us-east-1", BaseURL: srv.URL, HTTPClient: srv.Client(),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "secret-DO-NOT-LEAK"}, nil
		}),
	})
}

func request() model.Request {
	return model.Request{Model: modelID, System: "Be brief.", Messages: fakeapi.Conversation(), Tools: fakeapi.Tools(), Params: model.Params{MaxTokens: 512}}
}

// Written from the Converse API reference's response syntax.
const textReply = `{
  "output": {"message": {"role": "assistant", "content": [{"text": "The chart shows growth."}]}},
  "stopReason": "end_turn",
  "usage": {"inputTokens": 100, "outputTokens": 12, "totalTokens": 312, "cacheReadInputTokens": 200, "cacheWriteInputTokens": 0},
  "metrics": {"latencyMs": 420}
}`

const callsReply = `{
  "output": {"message": {"role": "assistant", "content": [
    {"text": "I'll look at both."},
    {"toolUse": {"toolUseId": "tooluse_a", "name": "screenshot", "input": {"window": "main"}}},
    {"toolUse": {"toolUseId": "tooluse_b", "name": "fetch", "input": {"url": "https://example.com"}}}
  ]}},
  "stopReason": "tool_use",
  "usage": {"inputTokens": 90, "outputTokens": 40, "totalTokens": 130},
  "metrics": {"latencyMs": 300}
}`

func TestText(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: textReply})
	resp, err := provider(t, srv).Complete(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, "The chart shows growth.", resp.Message.Text())
	require.Equal(t, model.StopEnd, resp.StopReason)
	require.Equal(t, model.Usage{InputTokens: 300, OutputTokens: 12, CachedTokens: 200}, resp.Usage)

	got := srv.Last(t)
	require.Equal(t, "/model/"+modelID+"/converse", got.Path)
	require.True(t, strings.HasPrefix(got.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/"), "signed with the chain's credentials")
	body := got.JSON(t)
	rest, _ := json.Marshal(map[string]any{"system": body["system"], "toolConfig": body["toolConfig"], "inferenceConfig": body["inferenceConfig"]})
	require.JSONEq(t, `{
	  "system": [{"text": "Be brief."}],
	  "inferenceConfig": {"maxTokens": 512},
	  "toolConfig": {"tools": [
	    {"toolSpec": {"name": "screenshot", "description": "Capture a window.", "inputSchema": {"json": {"type":"object","properties":{"window":{"type":"string"}},"required":["window"]}}}},
	    {"toolSpec": {"name": "fetch", "description": "Fetch a URL.", "inputSchema": {"json": {"type":"object","properties":{"url":{"type":"string"}}}}}}
	  ]}
	}`, string(rest))
}

func TestParallelToolCalls(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: callsReply})
	resp, err := provider(t, srv).Complete(context.Background(), request())
	require.NoError(t, err)
	require.Equal(t, model.StopToolCalls, resp.StopReason)
	require.Equal(t, "I'll look at both.", resp.Message.Text())
	require.Equal(t, []results.ToolCall{
		{ID: "tooluse_a", Name: "screenshot", Arguments: `{"window":"main"}`},
		{ID: "tooluse_b", Name: "fetch", Arguments: `{"url":"https://example.com"}`},
	}, resp.Message.ToolCalls)
}

// TestMediaInToolResult proves where a SucceedParts(text, image, text)
// outcome lands: inside its toolResult's content, in order, and that a
// refused type becomes a text block there.
func TestMediaInToolResult(t *testing.T) {
	srv := fakeapi.New(t, fakeapi.Reply{Body: textReply})
	_, err := provider(t, srv).Complete(context.Background(), request())
	require.NoError(t, err)
	messages, _ := json.Marshal(srv.Last(t).JSON(t)["messages"])
	require.JSONEq(t, `[
	  {"role": "user", "content": [{"text": "Show me the chart."}]},
	  {"role": "assistant", "content": [
	    {"text": "Looking."},
	    {"toolUse": {"toolUseId": "call_1", "name": "screenshot", "input": {"window": "main"}}},
	    {"toolUse": {"toolUseId": "call_2", "name": "fetch", "input": {"url": "https://example.com/a"}}}
	  ]},
	  {"role": "user", "content": [
	    {"toolResult": {"toolUseId": "call_1", "content": [
	      {"text": "before the chart"},
	      {"image": {"format": "png", "source": {"bytes": "`+fakeapi.PNGBase64+`"}}},
	      {"text": "after the chart"}
	    ]}},
	    {"toolResult": {"toolUseId": "call_2", "content": [
	      {"text": "the page is attached"},
	      {"text": "[`+fakeapi.RefusedType+` not shown: Bedrock accepts PNG, JPEG, GIF and WebP images and PDF, CSV, Word, Excel, HTML, text and Markdown documents only]"}
	    ]}}
	  ]}
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
			name: "429 with Retry-After",
			reply: fakeapi.Reply{Status: 429, Header: map[string]string{"Retry-After": "3", "X-Amzn-Errortype": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
				Body: `{"message":"Too many requests, please wait before trying again."}`},
			retryable: true, after: 3 * time.Second, contains: "rate limited",
		},
		{
			name: "context length",
			reply: fakeapi.Reply{Status: 400, Header: map[string]string{"X-Amzn-Errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
				Body: `{"message":"Input is too long for requested model."}`},
			context: true, contains: "context window",
		},
		{
			name: "403 is not retried",
			reply: fakeapi.Reply{Status: 403, Header: map[string]string{"X-Amzn-Errortype": "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
				Body: `{"message":"You don't have access to the model with the specified model ID."}`},
			contains: "permission denied",
		},
		{
			name: "503 retries",
			reply: fakeapi.Reply{Status: 503, Header: map[string]string{"X-Amzn-Errortype": "ServiceUnavailableException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
				Body: `{"message":"Service is temporarily unavailable."}`},
			retryable: true, contains: "server error",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeapi.New(t, tc.reply)
			_, err := provider(t, srv).Complete(context.Background(), request())
			var me *model.Error
			require.ErrorAs(t, err, &me)
			require.Equal(t, tc.retryable, me.Retryable)
			require.Equal(t, tc.after, me.RetryAfter)
			require.Equal(t, tc.context, errors.Is(err, model.ErrContextLength))
			require.Contains(t, me.Message, tc.contains)
			require.NotContains(t, err.Error(), "DO-NOT-LEAK")
			require.Len(t, srv.Requests(), 1, "the SDK does not retry behind Temporal")
		})
	}
}

func TestNoRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	_, err := New(Config{}).Complete(context.Background(), request())
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.False(t, me.Retryable)
	require.Contains(t, me.Message, "AWS_REGION")
}

// eventStream frames events as the ConverseStream response does: AWS
// event-stream messages with :message-type, :event-type and a JSON
// payload.
func eventStream(t *testing.T, events ...[2]string) string {
	t.Helper()
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, e := range events {
		msg := eventstream.Message{Payload: []byte(e[1])}
		if strings.HasSuffix(e[0], "Exception") {
			msg.Headers.Set(":message-type", eventstream.StringValue("exception"))
			msg.Headers.Set(":exception-type", eventstream.StringValue(e[0]))
		} else {
			msg.Headers.Set(":message-type", eventstream.StringValue("event"))
			msg.Headers.Set(":event-type", eventstream.StringValue(e[0]))
		}
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		require.NoError(t, enc.Encode(&buf, msg))
	}
	return buf.String()
}

func TestStreaming(t *testing.T) {
	body := eventStream(t,
		[2]string{"messageStart", `{"role":"assistant"}`},
		[2]string{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Let me "}}`},
		[2]string{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"look."}}`},
		[2]string{"contentBlockStop", `{"contentBlockIndex":0}`},
		[2]string{"contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tooluse_a","name":"screenshot"}}}`},
		[2]string{"contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"window\":"}}}`},
		[2]string{"contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"\"main\"}"}}}`},
		[2]string{"contentBlockStop", `{"contentBlockIndex":1}`},
		[2]string{"messageStop", `{"stopReason":"tool_use"}`},
		[2]string{"metadata", `{"usage":{"inputTokens":50,"outputTokens":9,"totalTokens":69,"cacheReadInputTokens":10},"metrics":{"latencyMs":100}}`},
	)
	srv := fakeapi.New(t, fakeapi.Reply{ContentType: "application/vnd.amazon.eventstream", Body: body})
	var deltas []model.Delta
	ctx := model.WithStream(context.Background(), func(d model.Delta) { deltas = append(deltas, d) })
	resp, err := provider(t, srv).Complete(ctx, request())
	require.NoError(t, err)
	require.Equal(t, "/model/"+modelID+"/converse-stream", srv.Last(t).Path)
	require.Equal(t, []model.Delta{
		{Kind: model.DeltaText, Text: "Let me "},
		{Kind: model.DeltaText, Text: "look."},
		{Kind: model.DeltaToolCall, Index: 0, ToolCallID: "tooluse_a", ToolName: "screenshot"},
		{Kind: model.DeltaToolCall, Index: 0, Arguments: `{"window":`},
		{Kind: model.DeltaToolCall, Index: 0, Arguments: `"main"}`},
	}, deltas)
	require.Equal(t, "Let me look.", resp.Message.Text())
	require.Equal(t, []results.ToolCall{{ID: "tooluse_a", Name: "screenshot", Arguments: `{"window":"main"}`}}, resp.Message.ToolCalls)
	require.Equal(t, model.StopToolCalls, resp.StopReason)
	require.Equal(t, model.Usage{InputTokens: 60, OutputTokens: 9, CachedTokens: 10}, resp.Usage)
}

func TestStreamException(t *testing.T) {
	body := eventStream(t,
		[2]string{"messageStart", `{"role":"assistant"}`},
		[2]string{"validationException", `{"message":"Input is too long for requested model."}`},
	)
	srv := fakeapi.New(t, fakeapi.Reply{ContentType: "application/vnd.amazon.eventstream", Body: body})
	ctx := model.WithStream(context.Background(), func(model.Delta) {})
	_, err := provider(t, srv).Complete(ctx, request())
	require.ErrorIs(t, err, model.ErrContextLength)

	body = eventStream(t, [2]string{"throttlingException", `{"message":"Too many tokens, please wait before trying again."}`})
	srv = fakeapi.New(t, fakeapi.Reply{ContentType: "application/vnd.amazon.eventstream", Body: body})
	_, err = provider(t, srv).Complete(ctx, request())
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.True(t, me.Retryable)
}
