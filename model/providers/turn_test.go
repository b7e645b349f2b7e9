package providers_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/model/internal/fakeapi"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

type noArgs struct{}

// screenshot returns text, an image and text: what every provider must
// carry into its next request in that order.
var screenshot = tool.MustFunc(tool.Spec{Name: "screenshot", Description: "Capture the screen."},
	func(context.Context, tool.Call, noArgs) (results.Outcome, error) {
		return results.Succeed(results.TextPart("before"), results.MediaPart("image/png", fakeapi.PNG), results.TextPart("after")), nil
	})

// TestTurnAgainstEachProvider runs a whole turn (AgentTurn with the real
// activities, in the SDK's test environment) through each new provider
// against a fake server of its API: the model calls screenshot, then
// answers; the second request must carry the tool's image.
func TestTurnAgainstEachProvider(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	cases := []struct {
		model   string
		config  func(url string) providers.Config
		replies []fakeapi.Reply
		// ordered, for APIs that carry media apart from the text, is how
		// the text marks each medium's place; empty means the image
		// itself sits between the two texts.
		ordered string
	}{
		{
			model: "responses:gpt-4.1",
			config: func(u string) providers.Config {
				return providers.Config{OpenAIKey: "sk-test", OpenAIBaseURL: u + "/v1"}
			},
			replies: []fakeapi.Reply{
				{Body: `{"id":"r1","object":"response","status":"completed","output":[{"type":"function_call","id":"fc1","call_id":"call_s","name":"screenshot","arguments":"{}","status":"completed"}],"usage":{"input_tokens":10,"output_tokens":5}}`},
				{Body: `{"id":"r2","object":"response","status":"completed","output":[{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"I see the screen."}]}],"usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":10},"output_tokens":5}}`},
			},
		},
		{
			model:  "gemini:gemini-2.5-flash",
			config: func(u string) providers.Config { return providers.Config{GeminiKey: "AIza-test", GeminiBaseURL: u} },
			replies: []fakeapi.Reply{
				{Body: `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"screenshot","args":{}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5},"responseId":"g1"}`},
				{Body: `{"candidates":[{"content":{"role":"model","parts":[{"text":"I see the screen."}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":5,"cachedContentTokenCount":10},"responseId":"g2"}`},
			},
			ordered: `"output":["before",{"$ref":"gemini_g1_0_1"},"after"]`,
		},
		{
			model:  "bedrock:amazon.nova-pro-v1:0",
			config: func(u string) providers.Config { return providers.Config{BedrockBaseURL: u} },
			replies: []fakeapi.Reply{
				{Body: `{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"tooluse_s","name":"screenshot","input":{}}}]}},"stopReason":"tool_use","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15}}`},
				{Body: `{"output":{"message":{"role":"assistant","content":[{"text":"I see the screen."}]}},"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":25,"cacheReadInputTokens":10}}`},
			},
		},
		{
			model:  "ollama-native:qwen3:8b",
			config: func(u string) providers.Config { return providers.Config{OllamaBaseURL: u + "/v1"} },
			replies: []fakeapi.Reply{
				{Body: `{"model":"qwen3:8b","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_s","function":{"name":"screenshot","arguments":{}}}]},"done":true,"done_reason":"stop","prompt_eval_count":10,"eval_count":5}` + "\n"},
				{Body: `{"model":"qwen3:8b","message":{"role":"assistant","content":"I see the screen."},"done":true,"done_reason":"stop","prompt_eval_count":20,"eval_count":5}` + "\n"},
			},
			ordered: `"content":"before\n[image 1]\nafter"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			srv := fakeapi.New(t, tc.replies...)
			turn := tollgatetest.NewTurn(t, tollgate.Options{Tools: []tool.Tool{screenshot}, NoBuiltins: true, Models: tc.config(srv.URL)}, tollgatetest.NewModel())
			res, err := turn.Run(workflows.Input{Prompt: "What is on the screen?", Model: tc.model, Tools: []string{"screenshot"}})
			require.NoError(t, err)
			require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
			require.Equal(t, "I see the screen.", res.Text)
			require.Equal(t, 30, res.Usage.InputTokens)
			reqs := srv.Requests()
			require.Len(t, reqs, 2)
			second := string(reqs[1].Body)
			// Every API carries the image, base64, in the second request.
			img := strings.Index(second, base64.StdEncoding.EncodeToString(fakeapi.PNG))
			require.Positive(t, img, second)
			if tc.ordered != "" {
				require.Contains(t, second, tc.ordered)
				return
			}
			require.Less(t, strings.Index(second, "before"), img)
			require.Greater(t, strings.LastIndex(second, "after"), img)
		})
	}
}
