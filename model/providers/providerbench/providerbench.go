// Package providerbench measures what each provider's mapping and SDK
// cost to encode one agent step's request, against Chat Completions:
// the BenchmarkEncodeStep benchmark of model/providers and the
// EncodeStep rows of make bench.
package providerbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/results"
)

// cannedTransport answers every provider's request in process with the
// smallest reply its API allows, after reading the whole body: what the
// benchmark measures is each provider's mapping and its SDK's encoding,
// not a network.
type transport struct{ sent atomic.Int64 }

var replies = map[string]string{
	"/v1/chat/completions": `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`,
	"/v1/messages":         `{"id":"m","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`,
	"/v1/responses":        `{"id":"r","object":"response","status":"completed","output":[{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"ok"}]}],"usage":{"input_tokens":1,"output_tokens":1}}`,
	"generateContent":      `{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}]}`,
	"/converse":            `{"output":{"message":{"role":"assistant","content":[{"text":"ok"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}`,
	"/api/chat":            `{"model":"m","message":{"role":"assistant","content":"ok"},"done":true,"done_reason":"stop"}` + "\n",
}

func (c *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	n, _ := io.Copy(io.Discard, req.Body)
	_ = req.Body.Close()
	c.sent.Store(n)
	for suffix, body := range replies {
		if strings.HasSuffix(req.URL.Path, suffix) {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		}
	}
	return nil, fmt.Errorf("no canned reply for %s", req.URL.Path)
}

// Step is one step's request: ten messages, one image (64 KiB) in
// a tool result, and three tools.
func Step() model.Request {
	img := bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 16<<10)
	msgs := []results.Message{results.UserText("Fix the failing test in parser_test.go and show me the screenshot of the report.")}
	for i := 0; i < 4; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs, results.Message{Role: results.RoleAssistant, Parts: []results.Part{results.TextPart("Reading the next file.")},
			ToolCalls: []results.ToolCall{{ID: id, Name: "read_file", Arguments: fmt.Sprintf(`{"path":"src/file_%d.go"}`, i)}}})
		parts := []results.Part{results.TextPart(strings.Repeat("func parse(line string) (Token, error) { ... }\n", 40))}
		if i == 3 {
			parts = []results.Part{results.TextPart("report rendered"), results.MediaPart("image/png", img), results.TextPart("end of report")}
		}
		msgs = append(msgs, results.Message{Role: results.RoleTool, ToolCallID: id, ToolName: "read_file", Parts: parts})
	}
	msgs = append(msgs, results.UserText("Go on."))
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	return model.Request{
		System: "You are a careful coding agent.", Messages: msgs,
		Tools: []model.ToolDef{{Name: "read_file", Description: "Read a file.", Schema: schema}, {Name: "write_file", Description: "Write a file.", Schema: schema}, {Name: "shell", Description: "Run a command.", Schema: schema}},
	}
}

// Models are the benchmarked model strings, Chat Completions first.
var Models = []string{
	"openai:gpt-4.1", "anthropic:claude-sonnet-4-5", "responses:gpt-4.1",
	"gemini:gemini-2.5-flash", "bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0", "ollama-native:qwen3:8b",
}

// Bench encodes Step for modelString and hands it to an in-process
// transport, b.N times; it reports the request's size as req-bytes.
func Bench(b *testing.B, modelString string) {
	// Bedrock signs with the AWS SDK's chain; these keys sign nothing real.
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "bench",
		"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
	} {
		b.Setenv(k, v)
	}
	tr := &transport{}
	r := providers.NewRouter(providers.Config{
		OpenAIKey: "sk-bench", AnthropicKey: "sk-ant-bench", GeminiKey: "AIza-bench",
		OpenAIBaseURL: "http://openai.invalid/v1", AnthropicBaseURL: "http://anthropic.invalid",
		GeminiBaseURL: "http://gemini.invalid", BedrockRegion: "us-east-1", BedrockBaseURL: "http://bedrock.invalid",
		OllamaBaseURL: "http://ollama.invalid/v1", HTTPClient: &http.Client{Transport: tr},
	})
	p, name, err := r.Resolve(modelString)
	if err != nil {
		b.Fatal(err)
	}
	req := Step()
	req.Model = name
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(tr.sent.Load()), "req-bytes")
}
