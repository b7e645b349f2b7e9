// Package providers routes a "provider:name" model string to its
// model.Provider. It lives apart from package model because it imports
// every provider package, and they all import model.
//
// Prefixes:
//   - openai:<model>    Chat Completions at OPENAI_BASE_URL (default OpenAI),
//     which is how vLLM, llama.cpp, LM Studio or OpenRouter are reached.
//   - ollama:<model>    Chat Completions at Ollama's OpenAI endpoint
//     (OLLAMA_HOST, default http://localhost:11434/v1); no key.
//   - anthropic:<model> the Messages API.
//   - responses:<model> OpenAI's Responses API (OPENAI_API_KEY,
//     OPENAI_BASE_URL), media inside function_call_output.
//   - gemini:<model>    the Gemini API (GEMINI_API_KEY or GOOGLE_API_KEY).
//   - vertex:<model>    Gemini on Vertex AI (GOOGLE_CLOUD_PROJECT,
//     GOOGLE_CLOUD_LOCATION, Application Default Credentials).
//   - bedrock:<model>   Amazon Bedrock's Converse API (the AWS SDK's
//     default chain for region and credentials).
//   - ollama-native:<model> Ollama's own /api/chat at OLLAMA_HOST.
//   - scripted:<script> a built-in script ("demo"), or a script file beneath
//     the operator's scripts directory (Config.ScriptDir,
//     TOLLGATE_SCRIPTS_DIR); without one, only the built-ins.
package providers

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/anthropic"
	"github.com/tollgate-dev/tollgate/model/bedrock"
	"github.com/tollgate-dev/tollgate/model/gemini"
	"github.com/tollgate-dev/tollgate/model/ollama"
	"github.com/tollgate-dev/tollgate/model/openai"
	"github.com/tollgate-dev/tollgate/model/responses"
	"github.com/tollgate-dev/tollgate/model/scripted"
)

// DefaultOllamaBaseURL is where a local Ollama serves its OpenAI API.
const DefaultOllamaBaseURL = "http://localhost:11434/v1"

// Config is what the router needs. Empty fields mean defaults.
type Config struct {
	OpenAIKey, OpenAIBaseURL       string
	AnthropicKey, AnthropicBaseURL string
	// OllamaBaseURL is the OpenAI-compatible endpoint for "ollama:";
	// empty means DefaultOllamaBaseURL. "ollama-native:" uses the same
	// server without the /v1.
	OllamaBaseURL string
	// GeminiKey and GeminiBaseURL are for "gemini:".
	GeminiKey, GeminiBaseURL string
	// VertexProject, VertexLocation and VertexBaseURL are for "vertex:";
	// credentials are the Application Default Credentials.
	VertexProject, VertexLocation, VertexBaseURL string
	// BedrockRegion and BedrockBaseURL override the AWS SDK's default
	// chain for "bedrock:"; empty means what the chain says.
	BedrockRegion, BedrockBaseURL string
	// HTTPClient is shared by every provider; nil means each SDK's default.
	HTTPClient *http.Client
	// ScriptDir is the only directory "scripted:" may read script files
	// from: relative paths are taken from it, absolute ones must lie
	// beneath it, and neither ".." nor a symbolic link leads out. Empty
	// allows only the built-in scripts, since the model string comes from
	// whoever starts a turn.
	ScriptDir string
}

// ScriptDirVar names the scripts directory in the environment.
const ScriptDirVar = "TOLLGATE_SCRIPTS_DIR"

// maxKeyFileBytes bounds what a *_FILE variable may name: a key is a
// line, and a mistaken path (a log, a device) must not be read whole.
const maxKeyFileBytes = 64 << 10

// LoadConfigFromEnv reads OPENAI_API_KEY, OPENAI_BASE_URL,
// ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, OLLAMA_HOST (as Ollama itself
// reads it: host, host:port or a URL), GEMINI_API_KEY (or GOOGLE_API_KEY),
// GOOGLE_GEMINI_BASE_URL, GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION,
// GOOGLE_VERTEX_BASE_URL and TOLLGATE_SCRIPTS_DIR. Bedrock's region and
// credentials are the AWS SDK's own variables and files, read when the
// first Bedrock call is made.
//
// Each key may instead be read from a file named by OPENAI_API_KEY_FILE,
// ANTHROPIC_API_KEY_FILE or GEMINI_API_KEY_FILE (a mounted secret), which keeps it out of the
// environment a tool's child process could read. Setting both forms of
// one key, or naming a file that cannot be read or is empty, is an error
// that names the variable and never the file's content.
func LoadConfigFromEnv() (Config, error) {
	env := func(k string) string { return strings.TrimSpace(os.Getenv(k)) }
	openaiKey, err1 := keyFromEnv(openai.KeyVar)
	anthropicKey, err2 := keyFromEnv(anthropic.KeyVar)
	geminiKey, err3 := keyFromEnv(gemini.KeyVar)
	if geminiKey == "" && err3 == nil {
		// The name Google's SDKs also accept.
		geminiKey = env("GOOGLE_API_KEY")
	}
	location := env("GOOGLE_CLOUD_LOCATION")
	if location == "" {
		location = env("GOOGLE_CLOUD_REGION")
	}
	return Config{
		OpenAIKey:        openaiKey,
		OpenAIBaseURL:    env("OPENAI_BASE_URL"),
		AnthropicKey:     anthropicKey,
		AnthropicBaseURL: env("ANTHROPIC_BASE_URL"),
		OllamaBaseURL:    ollamaBaseURL(env("OLLAMA_HOST")),
		GeminiKey:        geminiKey,
		GeminiBaseURL:    env("GOOGLE_GEMINI_BASE_URL"),
		VertexProject:    env("GOOGLE_CLOUD_PROJECT"),
		VertexLocation:   location,
		VertexBaseURL:    env("GOOGLE_VERTEX_BASE_URL"),
		ScriptDir:        env(ScriptDirVar),
	}, errors.Join(err1, err2, err3)
}

// ConfigFromEnv is LoadConfigFromEnv for callers that cannot report an
// error: a key whose *_FILE variant is unusable is left empty, so the
// provider reports the key as not set when it is first used.
//
// Deprecated: use LoadConfigFromEnv, which says what is wrong at start.
func ConfigFromEnv() Config {
	cfg, _ := LoadConfigFromEnv()
	return cfg
}

// keyFromEnv reads the key in variable name, or in the file that
// name+"_FILE" names.
func keyFromEnv(name string) (string, error) {
	fileVar := name + "_FILE"
	direct := strings.TrimSpace(os.Getenv(name))
	path := strings.TrimSpace(os.Getenv(fileVar))
	switch {
	case path == "":
		return direct, nil
	case direct != "":
		return "", fmt.Errorf("%s and %s are both set; set only one", name, fileVar)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: cannot read the key file: %w", fileVar, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: cannot read the key file %s: %w", fileVar, path, err)
	}
	if len(data) > maxKeyFileBytes {
		return "", fmt.Errorf("%s: the key file %s is larger than %d KiB; it should hold only the key", fileVar, path, maxKeyFileBytes>>10)
	}
	key := strings.TrimSpace(string(data))
	if key == "" {
		return "", fmt.Errorf("%s: the key file %s is empty", fileVar, path)
	}
	if strings.ContainsAny(key, "\r\n") {
		return "", fmt.Errorf("%s: the key file %s holds more than one line; it should hold only the key", fileVar, path)
	}
	return key, nil
}

func ollamaBaseURL(host string) string {
	if host == "" {
		return ""
	}
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	host = strings.TrimRight(host, "/")
	if !strings.HasSuffix(host, "/v1") {
		host += "/v1"
	}
	return host
}

// Router resolves model strings. It is safe for concurrent use.
type Router struct {
	cfg       Config
	custom    map[string]model.Provider
	openai    *openai.Provider
	ollama    *openai.Provider
	anthropic *anthropic.Provider
	responses *responses.Provider
	gemini    *gemini.Provider
	vertex    *gemini.Provider
	bedrock   *bedrock.Provider
	native    *ollama.Provider
	scripts   *scripted.Scripts
}

// NewRouter builds the network providers once; their clients are safe to
// share across activities.
func NewRouter(cfg Config) *Router {
	if cfg.OllamaBaseURL == "" {
		cfg.OllamaBaseURL = DefaultOllamaBaseURL
	}
	cfg.HTTPClient = traced(cfg.HTTPClient)
	return &Router{
		cfg:       cfg,
		openai:    openai.New(openai.Config{APIKey: cfg.OpenAIKey, BaseURL: cfg.OpenAIBaseURL, HTTPClient: cfg.HTTPClient}),
		ollama:    openai.New(openai.Config{BaseURL: cfg.OllamaBaseURL, HTTPClient: cfg.HTTPClient}),
		anthropic: anthropic.New(anthropic.Config{APIKey: cfg.AnthropicKey, BaseURL: cfg.AnthropicBaseURL, HTTPClient: cfg.HTTPClient}),
		responses: responses.New(responses.Config{APIKey: cfg.OpenAIKey, BaseURL: cfg.OpenAIBaseURL, HTTPClient: cfg.HTTPClient}),
		gemini:    gemini.New(gemini.Config{APIKey: cfg.GeminiKey, BaseURL: cfg.GeminiBaseURL, HTTPClient: cfg.HTTPClient}),
		// Vertex AI's client must authenticate; the provider makes one from
		// the Application Default Credentials over the traced transport.
		vertex:  gemini.New(gemini.Config{Vertex: true, Project: cfg.VertexProject, Location: cfg.VertexLocation, BaseURL: cfg.VertexBaseURL, Transport: cfg.HTTPClient.Transport}),
		bedrock: bedrock.New(bedrock.Config{Region: cfg.BedrockRegion, BaseURL: cfg.BedrockBaseURL, HTTPClient: cfg.HTTPClient}),
		native:  ollama.New(ollama.Config{BaseURL: strings.TrimSuffix(strings.TrimRight(cfg.OllamaBaseURL, "/"), "/v1"), HTTPClient: cfg.HTTPClient}),
		scripts: scripted.NewScripts(cfg.ScriptDir),
	}
}

// builtinPrefixes are the providers every router has.
var builtinPrefixes = []string{"openai", "ollama", "anthropic", "responses", "gemini", "vertex", "bedrock", "ollama-native", "scripted"}

// NewRouterWith is NewRouter plus providers of the caller's own, by the
// prefix their model strings use ("acme:model-7" → custom["acme"]).
func NewRouterWith(cfg Config, custom map[string]model.Provider) (*Router, error) {
	r := NewRouter(cfg)
	r.custom = map[string]model.Provider{}
	for prefix, p := range custom {
		if slices.Contains(builtinPrefixes, prefix) {
			return nil, fmt.Errorf("providers: %q is a built-in provider; choose another prefix for your own", prefix)
		}
		if prefix == "" || strings.ContainsAny(prefix, ": ") || p == nil {
			return nil, fmt.Errorf("providers: a custom provider needs a non-empty prefix without ':' or spaces and a provider (got %q)", prefix)
		}
		r.custom[prefix] = p
	}
	return r, nil
}

// Resolve returns the provider for s and the model name to put in the
// request. Its errors are non-retryable *model.Error values: a model
// string that does not resolve now will not resolve on a retry.
func (r *Router) Resolve(s string) (model.Provider, string, error) {
	prefix, name, err := model.ParseName(s)
	if err != nil {
		return nil, "", &model.Error{Message: err.Error()}
	}
	if p, ok := r.custom[prefix]; ok {
		return p, name, nil
	}
	// Their APIs take tool names of letters, digits, '_' and '-' only.
	switch prefix {
	case "openai":
		return model.WireNames(r.openai), name, nil
	case "ollama":
		return model.WireNames(r.ollama), name, nil
	case "anthropic":
		return model.WireNames(r.anthropic), name, nil
	case "responses":
		return model.WireNames(r.responses), name, nil
	case "bedrock":
		return model.WireNames(r.bedrock), name, nil
	case "gemini":
		// Gemini's function names may hold dots; no renaming needed.
		return r.gemini, name, nil
	case "vertex":
		return r.vertex, name, nil
	case "ollama-native":
		return r.native, name, nil
	case "scripted":
		p, err := r.scripts.Provider(name)
		if err != nil {
			msg := err.Error()
			if errors.Is(err, scripted.ErrNotAllowed) && r.cfg.ScriptDir == "" {
				msg += "; the worker's operator can allow script files beneath a directory with " + ScriptDirVar
			}
			return nil, "", &model.Error{Message: msg}
		}
		return p, name, nil
	}
	return nil, "", &model.Error{Message: fmt.Sprintf("model %q: unknown provider %q; use openai, ollama, anthropic, responses, gemini, vertex, bedrock, ollama-native or scripted%s", s, prefix, r.customHint())}
}

func (r *Router) customHint() string {
	if len(r.custom) == 0 {
		return ""
	}
	names := make([]string, 0, len(r.custom))
	for p := range r.custom {
		names = append(names, p)
	}
	slices.Sort(names)
	return ", or this worker's own: " + strings.Join(names, ", ")
}
