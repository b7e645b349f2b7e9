package providers

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/anthropic"
	"github.com/tollgate-dev/tollgate/model/bedrock"
	"github.com/tollgate-dev/tollgate/model/gemini"
	"github.com/tollgate-dev/tollgate/model/ollama"
	"github.com/tollgate-dev/tollgate/model/openai"
	"github.com/tollgate-dev/tollgate/model/responses"
	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/results"
)

// The CallModel activity's resolver interface, restated so this package
// need not import activities.
var _ interface {
	Resolve(string) (model.Provider, string, error)
} = (*Router)(nil)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mine.json"), []byte(`{"replies":[{"text":"hello"}]}`), 0o644))
	r := NewRouter(Config{OpenAIKey: "k", AnthropicKey: "k", ScriptDir: dir})

	tests := []struct {
		in       string
		wantType any
		wantName string
		wantErr  string
	}{
		{in: "openai:gpt-4.1", wantType: &openai.Provider{}, wantName: "gpt-4.1"},
		{in: "openai:llama3:8b", wantType: &openai.Provider{}, wantName: "llama3:8b"},
		{in: "ollama:qwen3:4b", wantType: &openai.Provider{}, wantName: "qwen3:4b"},
		{in: "anthropic:claude-sonnet-4-5", wantType: &anthropic.Provider{}, wantName: "claude-sonnet-4-5"},
		{in: "scripted:demo", wantType: &scripted.Provider{}, wantName: "demo"},
		{in: "scripted:mine.json", wantType: &scripted.Provider{}, wantName: "mine.json"},
		{in: "scripted:" + filepath.Join(dir, "mine.json"), wantType: &scripted.Provider{}, wantName: filepath.Join(dir, "mine.json")},
		{in: "scripted:missing.json", wantErr: "read script"},
		{in: "scripted:../mine.json", wantErr: "must lie beneath the scripts directory"},
		{in: "scripted:/etc/passwd", wantErr: "must lie beneath the scripts directory"},
		{in: "scripted:nosuch", wantErr: `no built-in script "nosuch"`},
		{in: "responses:gpt-4.1", wantType: &responses.Provider{}, wantName: "gpt-4.1"},
		{in: "bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0", wantType: &bedrock.Provider{}, wantName: "anthropic.claude-sonnet-4-5-20250929-v1:0"},
		{in: "gemini:gemini-2.5-flash", wantType: &gemini.Provider{}, wantName: "gemini-2.5-flash"},
		{in: "vertex:gemini-2.5-pro", wantType: &gemini.Provider{}, wantName: "gemini-2.5-pro"},
		{in: "ollama-native:qwen3:8b", wantType: &ollama.Provider{}, wantName: "qwen3:8b"},
		{in: "mistral:large", wantErr: `unknown provider "mistral"; use openai, ollama, anthropic, responses, gemini, vertex, bedrock, ollama-native or scripted`},
		{in: "gpt-4.1", wantErr: "must be provider:name"},
		{in: "openai:", wantErr: "must be provider:name"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, name, err := r.Resolve(tt.in)
			if tt.wantErr != "" {
				var me *model.Error
				require.ErrorAs(t, err, &me)
				require.False(t, me.Retryable)
				require.Contains(t, me.Message, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if !strings.HasPrefix(tt.in, "scripted:") && !strings.HasPrefix(tt.in, "gemini:") && !strings.HasPrefix(tt.in, "vertex:") && !strings.HasPrefix(tt.in, "ollama-native:") {
				w, ok := p.(model.WireNamed)
				require.True(t, ok, "network providers get tool names their APIs take")
				p = w.Next
			}
			require.IsType(t, tt.wantType, p)
			require.Equal(t, tt.wantName, name)
		})
	}
}

// recorder answers every request with body and remembers the last path.
func recorder(t *testing.T, body string) (*httptest.Server, *string) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		path = req.URL.Path
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &path
}

func TestRoutesReachTheirServers(t *testing.T) {
	chat := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	messages := `{"id":"msg","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`
	resp := `{"id":"r","object":"response","status":"completed","output":[{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"hi"}]}],"usage":{"input_tokens":1,"output_tokens":1}}`
	gen := `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}]}`
	converse := `{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}`
	native := `{"model":"m","message":{"role":"assistant","content":"hi"},"done":true,"done_reason":"stop"}` + "\n"
	oai, oaiPath := recorder(t, chat)
	oll, ollPath := recorder(t, chat)
	ant, antPath := recorder(t, messages)
	rsp, rspPath := recorder(t, resp)
	gem, gemPath := recorder(t, gen)
	bed, bedPath := recorder(t, converse)
	nat, natPath := recorder(t, native)
	// Bedrock's credentials come from the AWS SDK's chain.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	r := NewRouter(Config{
		OpenAIKey: "sk-x", OpenAIBaseURL: oai.URL + "/v1",
		AnthropicKey: "sk-ant-x", AnthropicBaseURL: ant.URL,
		OllamaBaseURL: oll.URL + "/v1",
		GeminiKey:     "AIza-test", GeminiBaseURL: gem.URL,
		BedrockBaseURL: bed.URL,
	})
	// Responses and Ollama's native API live on servers of their own
	// here, so each path is checked apart from Chat Completions'.
	r.responses = responses.New(responses.Config{APIKey: "sk-x", BaseURL: rsp.URL + "/v1"})
	r.native = ollama.New(ollama.Config{BaseURL: nat.URL})
	for _, tt := range []struct {
		model string
		path  *string
		want  string
	}{
		{"openai:gpt-4.1", oaiPath, "/v1/chat/completions"},
		{"ollama:llama3.2", ollPath, "/v1/chat/completions"},
		{"anthropic:claude-sonnet-4-5", antPath, "/v1/messages"},
		{"responses:gpt-4.1", rspPath, "/v1/responses"},
		{"gemini:gemini-2.5-flash", gemPath, "/v1beta/models/gemini-2.5-flash:generateContent"},
		{"bedrock:amazon.nova-pro-v1:0", bedPath, "/model/amazon.nova-pro-v1:0/converse"},
		{"ollama-native:llama3.2", natPath, "/api/chat"},
	} {
		p, name, err := r.Resolve(tt.model)
		require.NoError(t, err)
		resp, err := p.Complete(context.Background(), model.Request{Model: name, Messages: []results.Message{results.UserText("hello")}})
		require.NoError(t, err, tt.model)
		require.Equal(t, "hi", resp.Message.Text())
		require.Equal(t, tt.want, *tt.path, tt.model)
	}
}

func TestMissingKeys(t *testing.T) {
	r := NewRouter(Config{})
	t.Setenv("GEMINI_API_KEY", "")
	t.Setenv("GOOGLE_API_KEY", "")
	for name, keyVar := range map[string]string{
		"openai:gpt-4.1": "OPENAI_API_KEY", "anthropic:claude-sonnet-4-5": "ANTHROPIC_API_KEY",
		"responses:gpt-4.1": "OPENAI_API_KEY", "gemini:gemini-2.5-flash": "GEMINI_API_KEY",
		"vertex:gemini-2.5-pro": "GOOGLE_CLOUD_PROJECT",
	} {
		p, modelName, err := r.Resolve(name)
		require.NoError(t, err)
		_, err = p.Complete(context.Background(), model.Request{Model: modelName, Messages: []results.Message{results.UserText("hi")}})
		var me *model.Error
		require.ErrorAs(t, err, &me)
		require.False(t, me.Retryable)
		require.Contains(t, me.Message, keyVar)
	}
}

func TestResolveWithoutScriptDir(t *testing.T) {
	// A worker whose operator named no scripts directory reads no script
	// files at all, whatever the model string says.
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"replies":[{"text":"hello"}]}`), 0o644))
	t.Chdir(dir)
	r := NewRouter(Config{})
	_, _, err := r.Resolve("scripted:demo")
	require.NoError(t, err)
	for _, ref := range []string{"mine.json", "./mine.json", file, "/etc/passwd"} {
		_, _, err := r.Resolve("scripted:" + ref)
		var me *model.Error
		require.ErrorAs(t, err, &me, ref)
		require.False(t, me.Retryable)
		require.Contains(t, me.Message, "only the built-in scripts (chat, demo, issues, long) may be used")
		require.Contains(t, me.Message, "TOLLGATE_SCRIPTS_DIR")
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", " sk-o ")
	t.Setenv("OPENAI_BASE_URL", "http://vllm:8000/v1")
	t.Setenv("ANTHROPIC_API_KEY", "sk-a")
	t.Setenv("ANTHROPIC_BASE_URL", "http://gateway")
	t.Setenv("OLLAMA_HOST", "gpu-box:11434")
	t.Setenv("TOLLGATE_SCRIPTS_DIR", "/srv/scripts")
	t.Setenv("OPENAI_API_KEY_FILE", "")
	t.Setenv("ANTHROPIC_API_KEY_FILE", "")
	t.Setenv("GEMINI_API_KEY_FILE", "")
	t.Setenv("GEMINI_API_KEY", "")
	t.Setenv("GOOGLE_API_KEY", "AIza-g")
	t.Setenv("GOOGLE_GEMINI_BASE_URL", "")
	t.Setenv("GOOGLE_CLOUD_PROJECT", "proj")
	t.Setenv("GOOGLE_CLOUD_LOCATION", "")
	t.Setenv("GOOGLE_CLOUD_REGION", "europe-west4")
	t.Setenv("GOOGLE_VERTEX_BASE_URL", "")
	want := Config{
		OpenAIKey: "sk-o", OpenAIBaseURL: "http://vllm:8000/v1",
		AnthropicKey: "sk-a", AnthropicBaseURL: "http://gateway",
		OllamaBaseURL: "http://gpu-box:11434/v1",
		GeminiKey:     "AIza-g",
		VertexProject: "proj", VertexLocation: "europe-west4",
		ScriptDir: "/srv/scripts",
	}
	got, err := LoadConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, want, ConfigFromEnv())
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	const secret = "sk-secret-do-not-print"
	for _, v := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY_FILE", "ANTHROPIC_API_KEY_FILE"} {
		t.Setenv(v, "")
	}

	t.Run("read, trailing newline trimmed", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY_FILE", write("openai", secret+"\n"))
		t.Setenv("ANTHROPIC_API_KEY_FILE", write("anthropic", "sk-ant\r\n"))
		cfg, err := LoadConfigFromEnv()
		require.NoError(t, err)
		require.Equal(t, secret, cfg.OpenAIKey)
		require.Equal(t, "sk-ant", cfg.AnthropicKey)
	})

	bad := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{
			name:    "both forms set",
			env:     map[string]string{"OPENAI_API_KEY": secret, "OPENAI_API_KEY_FILE": write("both", secret)},
			wantErr: "OPENAI_API_KEY and OPENAI_API_KEY_FILE are both set; set only one",
		},
		{
			name:    "missing file",
			env:     map[string]string{"ANTHROPIC_API_KEY_FILE": filepath.Join(dir, "nope")},
			wantErr: "ANTHROPIC_API_KEY_FILE: cannot read the key file",
		},
		{
			name:    "a directory",
			env:     map[string]string{"OPENAI_API_KEY_FILE": dir},
			wantErr: "OPENAI_API_KEY_FILE: cannot read the key file",
		},
		{
			name:    "empty file",
			env:     map[string]string{"OPENAI_API_KEY_FILE": write("empty", "\n")},
			wantErr: "OPENAI_API_KEY_FILE: the key file " + filepath.Join(dir, "empty") + " is empty",
		},
		{
			name:    "more than a key",
			env:     map[string]string{"OPENAI_API_KEY_FILE": write("lines", secret+"\nsecond line\n")},
			wantErr: "holds more than one line",
		},
		{
			name:    "far too large",
			env:     map[string]string{"ANTHROPIC_API_KEY_FILE": write("large", strings.Repeat(secret, 10000))},
			wantErr: "is larger than 64 KiB",
		},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, err := LoadConfigFromEnv()
			require.ErrorContains(t, err, tc.wantErr)
			require.NotContains(t, err.Error(), secret, "an error never quotes the key")
			require.Empty(t, cfg.OpenAIKey+cfg.AnthropicKey, "a key that could not be loaded is not half-loaded")

			// The deprecated form leaves the key unset, so the provider
			// says so when used instead of sending a wrong key.
			cfg = ConfigFromEnv()
			require.Empty(t, cfg.OpenAIKey+cfg.AnthropicKey)
		})
	}
}

func TestOllamaBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "",
		"127.0.0.1:11434":           "http://127.0.0.1:11434/v1",
		"http://ollama:11434/":      "http://ollama:11434/v1",
		"https://ollama.example/v1": "https://ollama.example/v1",
	} {
		require.Equal(t, want, ollamaBaseURL(in), in)
	}
}

type echoProvider struct{}

func (echoProvider) Complete(_ context.Context, req model.Request) (model.Response, error) {
	return model.Response{Message: results.AssistantText("echo")}, nil
}

func TestCustomProvidersByPrefix(t *testing.T) {
	r, err := NewRouterWith(Config{}, map[string]model.Provider{"acme": echoProvider{}})
	require.NoError(t, err)
	p, name, err := r.Resolve("acme:model-7")
	require.NoError(t, err)
	require.Equal(t, "model-7", name)
	require.IsType(t, echoProvider{}, p)

	_, _, err = r.Resolve("nope:x")
	require.ErrorContains(t, err, "or this worker's own: acme")

	_, err = NewRouterWith(Config{}, map[string]model.Provider{"openai": echoProvider{}})
	require.ErrorContains(t, err, `"openai" is a built-in provider`)
	_, err = NewRouterWith(Config{}, map[string]model.Provider{"a:b": echoProvider{}})
	require.Error(t, err)
}
