package openai

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

// fakeKey is what a leaked key would look like; no message may contain it.
const fakeKey = "sk-test-DO-NOT-LEAK-0123456789abcdef"

// server is an httptest server speaking Chat Completions: it records what
// it was sent and answers with a canned status, headers and body.
type server struct {
	*httptest.Server
	mu      sync.Mutex
	hits    int
	path    string
	header  http.Header
	body    []byte
	status  int
	headers map[string]string
	reply   string
	delay   time.Duration
}

func newServer(t *testing.T, status int, reply string, headers map[string]string) *server {
	t.Helper()
	s := &server{status: status, reply: reply, headers: headers}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.hits++
		s.path, s.header, s.body = r.URL.Path, r.Header.Clone(), b
		s.mu.Unlock()
		if s.delay > 0 {
			select {
			case <-time.After(s.delay):
			case <-r.Context().Done():
				return
			}
		}
		for k, v := range s.headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s.status)
		_, _ = io.WriteString(w, s.reply)
	}))
	t.Cleanup(s.Close)
	return s
}

// sent is the request body the server got, decoded loosely.
func (s *server) sent(t *testing.T) map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var v map[string]any
	require.NoError(t, json.Unmarshal(s.body, &v), string(s.body))
	return v
}

func (s *server) provider(key string) *Provider {
	return New(Config{APIKey: key, BaseURL: s.URL + "/v1", HTTPClient: s.Client()})
}

const parallelReply = `{
  "id": "chatcmpl-abc123",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4.1-2025-04-14",
  "choices": [{
    "index": 0,
    "message": {
      "role": "assistant",
      "content": null,
      "tool_calls": [
        {"id": "call_read", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}},
        {"id": "call_list", "type": "function", "function": {"name": "list_dir", "arguments": "{\"path\":\".\"}"}},
        {"id": "call_bad", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"unterminated"}}
      ],
      "refusal": null,
      "annotations": []
    },
    "logprobs": null,
    "finish_reason": "tool_calls"
  }],
  "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99, "prompt_tokens_details": {"cached_tokens": 64}},
  "service_tier": "default",
  "system_fingerprint": null
}`

const textReply = `{
  "id": "chatcmpl-xyz",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "llama3.2",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "All done."}, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
}`

var png = []byte{0x89, 'P', 'N', 'G', 1, 2, 3}

func conversation() []results.Message {
	return []results.Message{
		{Role: results.RoleUser, Parts: []results.Part{
			results.TextPart("What is in this picture?"),
			results.MediaPart("image/png", png),
		}},
		{Role: results.RoleAssistant, Parts: []results.Part{results.TextPart("Let me look.")}, ToolCalls: []results.ToolCall{
			{ID: "call_1", Name: "screenshot", Arguments: `{"window":"main"}`},
			{ID: "call_2", Name: "read_file", Arguments: `{"path": oops`},
		}},
		{Role: results.RoleTool, ToolCallID: "call_1", ToolName: "screenshot", Parts: []results.Part{
			results.TextPart("captured"), results.MediaPart("image/png", png),
		}},
		{Role: results.RoleTool, ToolCallID: "call_2", ToolName: "read_file", IsError: true, Parts: []results.Part{
			results.TextPart(`{"error":"arguments are not valid JSON"}`),
		}},
		results.UserText("Thanks. Now summarise."),
	}
}

func TestRequestBody(t *testing.T) {
	srv := newServer(t, 200, parallelReply, nil)
	temp := 0.2
	_, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{
		Model:    "gpt-4.1",
		System:   "You are careful.",
		Messages: conversation(),
		Tools: []model.ToolDef{{
			Name:        "read_file",
			Description: "Read a file in the workspace.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`),
		}},
		Params: model.Params{MaxTokens: 512, Temperature: &temp},
	})
	require.NoError(t, err)
	require.Equal(t, "/v1/chat/completions", srv.path)
	require.Equal(t, "Bearer "+fakeKey, srv.header.Get("Authorization"))

	dataURL := "data:image/png;base64,iVBORwECAw=="
	want := `{
	  "model": "gpt-4.1",
	  "max_tokens": 512,
	  "temperature": 0.2,
	  "messages": [
	    {"role": "system", "content": "You are careful."},
	    {"role": "user", "content": [
	      {"type": "text", "text": "What is in this picture?"},
	      {"type": "image_url", "image_url": {"url": "` + dataURL + `"}}
	    ]},
	    {"role": "assistant", "content": "Let me look.", "tool_calls": [
	      {"id": "call_1", "type": "function", "function": {"name": "screenshot", "arguments": "{\"window\":\"main\"}"}},
	      {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": oops"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_1", "content": "captured\n[image/png]"},
	    {"role": "tool", "tool_call_id": "call_2", "content": "{\"error\":\"arguments are not valid JSON\"}"},
	    {"role": "user", "content": [
	      {"type": "text", "text": "Media returned by tool call call_1 (screenshot):"},
	      {"type": "image_url", "image_url": {"url": "` + dataURL + `"}}
	    ]},
	    {"role": "user", "content": "Thanks. Now summarise."}
	  ],
	  "tools": [{"type": "function", "function": {
	    "name": "read_file",
	    "description": "Read a file in the workspace.",
	    "parameters": {"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}
	  }}]
	}`
	got, _ := json.Marshal(srv.sent(t))
	require.JSONEq(t, want, string(got))
}

func TestMaxTokensFieldByServer(t *testing.T) {
	// Only the official endpoint gets max_completion_tokens; an
	// httptest server stands in for it through a rewriting transport.
	srv := newServer(t, 200, textReply, nil)
	client := &http.Client{Transport: rewrite{to: srv.URL}}
	p := New(Config{APIKey: fakeKey, HTTPClient: client})
	_, err := p.Complete(context.Background(), model.Request{Model: "gpt-4.1", Messages: []results.Message{results.UserText("hi")}, Params: model.Params{MaxTokens: 64}})
	require.NoError(t, err)
	body := srv.sent(t)
	require.EqualValues(t, 64, body["max_completion_tokens"])
	require.NotContains(t, body, "max_tokens")
}

type rewrite struct{ to string }

func (r rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	target, _ := http.NewRequest(req.Method, r.to, nil)
	req.URL.Scheme, req.URL.Host = target.URL.Scheme, target.URL.Host
	req.Host = target.URL.Host
	return http.DefaultTransport.RoundTrip(req)
}

func TestResponse(t *testing.T) {
	tests := []struct {
		name  string
		reply string
		want  model.Response
	}{
		{
			name:  "parallel tool calls keep their order and raw arguments",
			reply: parallelReply,
			want: model.Response{
				Message: results.Message{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{
					{ID: "call_read", Name: "read_file", Arguments: `{"path":"notes.txt"}`},
					{ID: "call_list", Name: "list_dir", Arguments: `{"path":"."}`},
					{ID: "call_bad", Name: "read_file", Arguments: `{"path": "unterminated`},
				}},
				StopReason: model.StopToolCalls,
				Usage:      model.Usage{InputTokens: 82, OutputTokens: 17, CachedTokens: 64},
			},
		},
		{
			name:  "final text",
			reply: textReply,
			want: model.Response{
				Message:    results.AssistantText("All done."),
				StopReason: model.StopEnd,
				Usage:      model.Usage{InputTokens: 10, OutputTokens: 3},
			},
		},
		{
			name:  "tool calls reported as stop, without ids",
			reply: `{"id":"chatcmpl-9","object":"chat.completion","created":1,"model":"qwen3","choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"list_dir","arguments":"{}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`,
			want: model.Response{
				Message: results.Message{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{
					{ID: "call_chatcmpl-9_0", Name: "list_dir", Arguments: `{}`},
				}},
				StopReason: model.StopToolCalls,
				Usage:      model.Usage{InputTokens: 1, OutputTokens: 1},
			},
		},
		{
			name:  "cut off by the token limit",
			reply: `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Once upon"},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
			want: model.Response{
				Message:    results.AssistantText("Once upon"),
				StopReason: model.StopMaxTokens,
				Usage:      model.Usage{InputTokens: 5, OutputTokens: 2},
			},
		},
		{
			name:  "content filter",
			reply: `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"content_filter"}]}`,
			want: model.Response{
				Message:    results.AssistantText("I can't help with that."),
				StopReason: model.StopOther,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, 200, tt.reply, nil)
			got, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "m", Messages: []results.Message{results.UserText("go")}})
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestErrors(t *testing.T) {
	// Real OpenAI error bodies; the 401 one echoes the key, as a careless
	// compatible server might.
	tests := []struct {
		name       string
		status     int
		headers    map[string]string
		body       string
		retryable  bool
		retryAfter time.Duration
		contains   []string
	}{
		{
			name:       "rate limited with Retry-After seconds",
			status:     429,
			headers:    map[string]string{"Retry-After": "7"},
			body:       `{"error":{"message":"Rate limit reached for gpt-4.1 on tokens per min (TPM).","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			retryable:  true,
			retryAfter: 7 * time.Second,
			contains:   []string{"rate limited", "Rate limit reached"},
		},
		{
			name:       "rate limited with retry-after-ms",
			status:     429,
			headers:    map[string]string{"retry-after-ms": "1500", "Retry-After": "2"},
			body:       `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`,
			retryable:  true,
			retryAfter: 1500 * time.Millisecond,
		},
		{
			name:      "server error",
			status:    500,
			body:      `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`,
			retryable: true,
			contains:  []string{"server error", "had an error"},
		},
		{
			name:      "bad gateway with a non-JSON body",
			status:    502,
			body:      `<html><body>502 Bad Gateway</body></html>`,
			retryable: true,
			contains:  []string{"502 Bad Gateway"},
		},
		{
			name:      "request timeout",
			status:    408,
			body:      `{"error":{"message":"timed out"}}`,
			retryable: true,
		},
		{
			name:     "bad request",
			status:   400,
			body:     `{"error":{"message":"Invalid schema for function 'read_file': 'object' is not valid.","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}`,
			contains: []string{"bad request", "Invalid schema for function 'read_file'", "invalid_request_error"},
		},
		{
			name:     "authentication failed, key echoed back",
			status:   401,
			body:     `{"error":{"message":"Incorrect API key provided: ` + fakeKey + `. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			contains: []string{"authentication failed", "OPENAI_API_KEY", "Incorrect API key provided"},
		},
		{
			name:     "forbidden",
			status:   403,
			body:     `{"error":{"message":"Project does not have access to model gpt-5","type":"invalid_request_error"}}`,
			contains: []string{"permission denied", "does not have access"},
		},
		{
			name:     "unknown model",
			status:   404,
			body:     `{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			contains: []string{"not found", "gpt-9"},
		},
		{
			name:     "vLLM-style validation error",
			status:   422,
			body:     `{"object":"error","message":"max_tokens must be at least 1","type":"BadRequestError","code":422}`,
			contains: []string{"max_tokens must be at least 1"},
		},
		{
			name:     "Ollama-style not found",
			status:   404,
			body:     `{"error":"model \"llama9\" not found, try pulling it first"}`,
			contains: []string{`model "llama9" not found`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.status, tt.body, tt.headers)
			_, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "gpt-4.1", Messages: []results.Message{results.UserText("hi")}})
			require.Error(t, err)
			var me *model.Error
			require.ErrorAs(t, err, &me)
			require.Equal(t, tt.retryable, me.Retryable)
			require.Equal(t, tt.status, me.Status)
			require.Equal(t, tt.retryAfter, me.RetryAfter)
			require.NotContains(t, err.Error(), fakeKey)
			require.NotContains(t, me.Message, fakeKey)
			for _, c := range tt.contains {
				require.Contains(t, err.Error(), c)
			}
			require.Equal(t, 1, srv.hits, "the SDK must not retry on its own")
		})
	}
}

func TestTransportErrors(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		srv := newServer(t, 200, textReply, nil)
		p := srv.provider(fakeKey)
		srv.Close()
		_, err := p.Complete(context.Background(), model.Request{Model: "m", Messages: []results.Message{results.UserText("hi")}})
		var me *model.Error
		require.ErrorAs(t, err, &me)
		require.True(t, me.Retryable)
		require.Contains(t, me.Message, "could not reach the server")
	})
	t.Run("timeout", func(t *testing.T) {
		srv := newServer(t, 200, textReply, nil)
		srv.delay = 5 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := srv.provider(fakeKey).Complete(ctx, model.Request{Model: "m", Messages: []results.Message{results.UserText("hi")}})
		var me *model.Error
		require.ErrorAs(t, err, &me)
		require.True(t, me.Retryable)
		require.Contains(t, me.Message, "timed out")
	})
	t.Run("garbage body with status 200", func(t *testing.T) {
		srv := newServer(t, 200, `{"choices": [`, nil)
		_, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "m", Messages: []results.Message{results.UserText("hi")}})
		var me *model.Error
		require.ErrorAs(t, err, &me)
		require.True(t, me.Retryable)
	})
}

func TestMissingKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", fakeKey)
	t.Run("default base URL needs a key", func(t *testing.T) {
		p := New(Config{HTTPClient: &http.Client{Transport: failTransport{t}}})
		_, err := p.Complete(context.Background(), model.Request{Model: "gpt-4.1", Messages: []results.Message{results.UserText("hi")}})
		var me *model.Error
		require.ErrorAs(t, err, &me)
		require.False(t, me.Retryable)
		require.Contains(t, me.Message, "OPENAI_API_KEY is not set")
	})
	t.Run("a local server needs none, and never gets the environment's key", func(t *testing.T) {
		srv := newServer(t, 200, textReply, nil)
		_, err := srv.provider("").Complete(context.Background(), model.Request{Model: "llama3.2", Messages: []results.Message{results.UserText("hi")}})
		require.NoError(t, err)
		require.Empty(t, srv.header.Get("Authorization"))
		for _, v := range srv.header {
			require.NotContains(t, strings.Join(v, " "), fakeKey)
		}
	})
}

type failTransport struct{ t *testing.T }

func (f failTransport) RoundTrip(*http.Request) (*http.Response, error) {
	f.t.Error("no request may be sent without a key")
	return nil, http.ErrHandlerTimeout
}

func TestNoChoices(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		retryable bool
		contains  string
	}{
		{"empty", `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[]}`, false, "no choices"},
		{"gateway error in a 200", `{"error":{"message":"Provider returned error","code":502}}`, true, "Provider returned error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, 200, tt.body, nil)
			_, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "m", Messages: []results.Message{results.UserText("hi")}})
			var me *model.Error
			require.ErrorAs(t, err, &me)
			require.Equal(t, tt.retryable, me.Retryable)
			require.Contains(t, me.Message, tt.contains)
		})
	}
}
