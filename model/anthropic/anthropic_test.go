package anthropic

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
const fakeKey = "sk-ant-api03-DO-NOT-LEAK-0123456789abcdef"

// server is an httptest server speaking the Messages API: it records what
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

func (s *server) sent(t *testing.T) map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var v map[string]any
	require.NoError(t, json.Unmarshal(s.body, &v), string(s.body))
	return v
}

func (s *server) provider(key string) *Provider {
	return New(Config{APIKey: key, BaseURL: s.URL, HTTPClient: s.Client()})
}

const parallelReply = `{
  "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "text", "text": "I'll read the notes and list the folder."},
    {"type": "tool_use", "id": "toolu_01A", "name": "read_file", "input": {"path": "notes.txt"}},
    {"type": "tool_use", "id": "toolu_01B", "name": "list_dir", "input": {"path": "."}},
    {"type": "tool_use", "id": "toolu_01C", "name": "list_dir", "input": {}}
  ],
  "stop_reason": "tool_use",
  "stop_sequence": null,
  "usage": {"input_tokens": 120, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 50, "output_tokens": 64}
}`

var png = []byte{0x89, 'P', 'N', 'G', 1, 2, 3}

func conversation() []results.Message {
	return []results.Message{
		results.SystemText("Answer in English."),
		{Role: results.RoleUser, Parts: []results.Part{
			results.TextPart("What is in this picture?"),
			results.MediaPart("image/png", png),
		}},
		{Role: results.RoleAssistant, Parts: []results.Part{results.TextPart("Let me look.")}, ToolCalls: []results.ToolCall{
			{ID: "toolu_1", Name: "screenshot", Arguments: `{"window":"main"}`},
			{ID: "toolu_2", Name: "read_file", Arguments: `{"path": oops`},
			{ID: "toolu_3", Name: "list_dir", Arguments: ``},
		}},
		{Role: results.RoleTool, ToolCallID: "toolu_1", ToolName: "screenshot", Parts: []results.Part{
			results.TextPart("captured"), results.MediaPart("image/png", png),
		}},
		{Role: results.RoleTool, ToolCallID: "toolu_2", ToolName: "read_file", IsError: true, Parts: []results.Part{
			results.TextPart(`{"error":"arguments are not valid JSON"}`),
		}},
		{Role: results.RoleTool, ToolCallID: "toolu_3", ToolName: "list_dir", Parts: []results.Part{
			results.JSONPart(json.RawMessage(`["a.txt","b.txt"]`)),
		}},
		results.UserText("Thanks. Now summarise."),
		results.AssistantText("Here is the summary."),
	}
}

func TestRequestBody(t *testing.T) {
	srv := newServer(t, 200, parallelReply, nil)
	_, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{
		Model:    "claude-sonnet-4-5",
		System:   "You are careful.",
		Messages: conversation(),
		Tools: []model.ToolDef{{
			Name:        "read_file",
			Description: "Read a file in the workspace.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`),
		}},
	})
	require.NoError(t, err)
	require.Equal(t, "/v1/messages", srv.path)
	require.Contains(t, srv.header.Get("Authorization")+srv.header.Get("X-Api-Key"), fakeKey)

	img := `{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORwECAw=="}}`
	want := `{
	  "model": "claude-sonnet-4-5",
	  "max_tokens": 4096,
	  "system": [{"type": "text", "text": "You are careful.\n\nAnswer in English."}],
	  "messages": [
	    {"role": "user", "content": [{"type": "text", "text": "What is in this picture?"}, ` + img + `]},
	    {"role": "assistant", "content": [
	      {"type": "text", "text": "Let me look."},
	      {"type": "tool_use", "id": "toolu_1", "name": "screenshot", "input": {"window": "main"}},
	      {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {}},
	      {"type": "tool_use", "id": "toolu_3", "name": "list_dir", "input": {}}
	    ]},
	    {"role": "user", "content": [
	      {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "captured"}, ` + img + `]},
	      {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true, "content": [{"type": "text", "text": "{\"error\":\"arguments are not valid JSON\"}"}]},
	      {"type": "tool_result", "tool_use_id": "toolu_3", "content": [{"type": "text", "text": "[\"a.txt\",\"b.txt\"]"}]},
	      {"type": "text", "text": "Thanks. Now summarise."}
	    ]},
	    {"role": "assistant", "content": [{"type": "text", "text": "Here is the summary."}]}
	  ],
	  "tools": [{
	    "name": "read_file",
	    "description": "Read a file in the workspace.",
	    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false}
	  }]
	}`
	got, _ := json.Marshal(srv.sent(t))
	require.JSONEq(t, want, string(got))
}

func TestMaxTokens(t *testing.T) {
	srv := newServer(t, 200, parallelReply, nil)
	_, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{
		Model: "claude-haiku-4-5", Messages: []results.Message{results.UserText("hi")}, Params: model.Params{MaxTokens: 1000},
	})
	require.NoError(t, err)
	require.EqualValues(t, 1000, srv.sent(t)["max_tokens"])
}

func TestResponse(t *testing.T) {
	tests := []struct {
		name  string
		reply string
		want  model.Response
	}{
		{
			name:  "parallel tool calls keep their order",
			reply: parallelReply,
			want: model.Response{
				Message: results.Message{
					Role:  results.RoleAssistant,
					Parts: []results.Part{results.TextPart("I'll read the notes and list the folder.")},
					ToolCalls: []results.ToolCall{
						{ID: "toolu_01A", Name: "read_file", Arguments: `{"path": "notes.txt"}`},
						{ID: "toolu_01B", Name: "list_dir", Arguments: `{"path": "."}`},
						{ID: "toolu_01C", Name: "list_dir", Arguments: `{}`},
					},
				},
				StopReason: model.StopToolCalls,
				Usage:      model.Usage{InputTokens: 200, OutputTokens: 64, CachedTokens: 50},
			},
		},
		{
			name:  "final text",
			reply: `{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":2}}`,
			want: model.Response{
				Message:    results.AssistantText("Done."),
				StopReason: model.StopEnd,
				Usage:      model.Usage{InputTokens: 10, OutputTokens: 2},
			},
		},
		{
			name:  "max tokens",
			reply: `{"id":"msg_3","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Once"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":4096}}`,
			want: model.Response{
				Message:    results.AssistantText("Once"),
				StopReason: model.StopMaxTokens,
				Usage:      model.Usage{InputTokens: 10, OutputTokens: 4096},
			},
		},
		{
			name:  "refusal",
			reply: `{"id":"msg_4","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":0}}`,
			want: model.Response{
				Message:    results.Message{Role: results.RoleAssistant},
				StopReason: model.StopOther,
				Usage:      model.Usage{InputTokens: 10},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, 200, tt.reply, nil)
			got, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "claude-sonnet-4-5", Messages: []results.Message{results.UserText("go")}})
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func errorBody(typ, msg string) string {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
	return string(b)
}

func TestErrors(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name      string
		status    int
		headers   map[string]string
		body      string
		retryable bool
		// minRetry and maxRetry bound RetryAfter (an HTTP date is
		// relative to the clock).
		minRetry, maxRetry time.Duration
		contains           []string
	}{
		{
			name:      "rate limited with Retry-After seconds",
			status:    429,
			headers:   map[string]string{"Retry-After": "20"},
			body:      errorBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
			retryable: true, minRetry: 20 * time.Second, maxRetry: 20 * time.Second,
			contains: []string{"anthropic: rate limited", "per-minute rate limit", "rate_limit_error"},
		},
		{
			name:      "rate limited with an HTTP date",
			status:    429,
			headers:   map[string]string{"Retry-After": date},
			body:      errorBody("rate_limit_error", "slow down"),
			retryable: true, minRetry: 80 * time.Second, maxRetry: 91 * time.Second,
		},
		{
			name:      "overloaded",
			status:    529,
			body:      errorBody("overloaded_error", "Overloaded"),
			retryable: true,
			contains:  []string{"server error", "Overloaded"},
		},
		{
			name:      "internal server error",
			status:    500,
			body:      errorBody("api_error", "Internal server error"),
			retryable: true,
		},
		{
			name:     "bad request",
			status:   400,
			body:     errorBody("invalid_request_error", "messages.1.content.1: unexpected `tool_use_id` found in `tool_result` blocks"),
			contains: []string{"bad request", "unexpected `tool_use_id`"},
		},
		{
			name:     "authentication failed, key echoed back",
			status:   401,
			body:     errorBody("authentication_error", "invalid x-api-key "+fakeKey),
			contains: []string{"authentication failed", "ANTHROPIC_API_KEY", "authentication_error"},
		},
		{
			name:     "permission denied",
			status:   403,
			body:     errorBody("permission_error", "Your API key does not have permission to use the specified resource."),
			contains: []string{"permission denied"},
		},
		{
			name:     "unknown model",
			status:   404,
			body:     errorBody("not_found_error", "model: claude-9"),
			contains: []string{"not found", "claude-9"},
		},
		{
			name:     "request too large",
			status:   413,
			body:     errorBody("request_too_large", "Request exceeds the maximum allowed number of bytes."),
			contains: []string{"request rejected", "maximum allowed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, tt.status, tt.body, tt.headers)
			_, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "claude-sonnet-4-5", Messages: []results.Message{results.UserText("hi")}})
			var me *model.Error
			require.ErrorAs(t, err, &me)
			require.Equal(t, tt.retryable, me.Retryable)
			require.Equal(t, tt.status, me.Status)
			require.GreaterOrEqual(t, me.RetryAfter, tt.minRetry)
			require.LessOrEqual(t, me.RetryAfter, tt.maxRetry)
			require.NotContains(t, err.Error(), fakeKey)
			for _, c := range tt.contains {
				require.Contains(t, err.Error(), c)
			}
			require.Equal(t, 1, srv.hits, "the SDK must not retry on its own")
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := newServer(t, 200, parallelReply, nil)
	p := srv.provider(fakeKey)
	srv.Close()
	_, err := p.Complete(context.Background(), model.Request{Model: "claude-sonnet-4-5", Messages: []results.Message{results.UserText("hi")}})
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.True(t, me.Retryable)
	require.NotContains(t, me.Message, fakeKey)
}

func TestMissingKey(t *testing.T) {
	// The SDK's own environment lookup must not stand in for the
	// worker's configuration.
	t.Setenv("ANTHROPIC_API_KEY", fakeKey)
	srv := newServer(t, 200, parallelReply, nil)
	_, err := srv.provider("").Complete(context.Background(), model.Request{Model: "claude-sonnet-4-5", Messages: []results.Message{results.UserText("hi")}})
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.False(t, me.Retryable)
	require.Contains(t, me.Message, "ANTHROPIC_API_KEY is not set")
	require.Zero(t, srv.hits)
}

func TestToolInput(t *testing.T) {
	tests := map[string]string{
		`{"path":"a"}`: `{"path":"a"}`,
		`{"path": "a`:  `{}`,
		``:             `{}`,
		`null`:         `{}`,
		`[1,2]`:        `{}`,
		`"text"`:       `{}`,
	}
	for in, want := range tests {
		require.Equal(t, want, string(toolInput(in)), "arguments %q", in)
	}
}

func TestUnsupportedMediaBecomesText(t *testing.T) {
	srv := newServer(t, 200, parallelReply, nil)
	_, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "claude-sonnet-4-5", Messages: []results.Message{
		{Role: results.RoleUser, Parts: []results.Part{results.MediaPart("audio/wav", []byte("RIFF")), results.MediaPart("application/pdf", []byte("%PDF"))}},
	}})
	require.NoError(t, err)
	got, _ := json.Marshal(srv.sent(t)["messages"])
	require.True(t, strings.Contains(string(got), "audio/wav not shown"), string(got))
	require.Contains(t, string(got), `"type":"document"`)
}
