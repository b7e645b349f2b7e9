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
//   - scripted:<script> a built-in script ("demo") or a script file.
package providers

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/tollgate-dev/tollgate/activities/model"
	"github.com/tollgate-dev/tollgate/activities/model/anthropic"
	"github.com/tollgate-dev/tollgate/activities/model/openai"
	"github.com/tollgate-dev/tollgate/activities/model/scripted"
)

// DefaultOllamaBaseURL is where a local Ollama serves its OpenAI API.
const DefaultOllamaBaseURL = "http://localhost:11434/v1"

// Config is what the router needs. Empty fields mean defaults.
type Config struct {
	OpenAIKey, OpenAIBaseURL       string
	AnthropicKey, AnthropicBaseURL string
	// OllamaBaseURL is the OpenAI-compatible endpoint for "ollama:";
	// empty means DefaultOllamaBaseURL.
	OllamaBaseURL string
	// HTTPClient is shared by every provider; nil means each SDK's default.
	HTTPClient *http.Client
	// ScriptDir is where relative "scripted:" paths are found; empty means
	// the working directory.
	ScriptDir string
}

// ConfigFromEnv reads OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL and OLLAMA_HOST (as Ollama itself reads it: host,
// host:port or a URL).
func ConfigFromEnv() Config {
	env := func(k string) string { return strings.TrimSpace(os.Getenv(k)) }
	return Config{
		OpenAIKey:        env("OPENAI_API_KEY"),
		OpenAIBaseURL:    env("OPENAI_BASE_URL"),
		AnthropicKey:     env("ANTHROPIC_API_KEY"),
		AnthropicBaseURL: env("ANTHROPIC_BASE_URL"),
		OllamaBaseURL:    ollamaBaseURL(env("OLLAMA_HOST")),
	}
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
	openai    *openai.Provider
	ollama    *openai.Provider
	anthropic *anthropic.Provider
}

// NewRouter builds the network providers once; their clients are safe to
// share across activities.
func NewRouter(cfg Config) *Router {
	if cfg.OllamaBaseURL == "" {
		cfg.OllamaBaseURL = DefaultOllamaBaseURL
	}
	return &Router{
		cfg:       cfg,
		openai:    openai.New(openai.Config{APIKey: cfg.OpenAIKey, BaseURL: cfg.OpenAIBaseURL, HTTPClient: cfg.HTTPClient}),
		ollama:    openai.New(openai.Config{BaseURL: cfg.OllamaBaseURL, HTTPClient: cfg.HTTPClient}),
		anthropic: anthropic.New(anthropic.Config{APIKey: cfg.AnthropicKey, BaseURL: cfg.AnthropicBaseURL, HTTPClient: cfg.HTTPClient}),
	}
}

// Resolve returns the provider for s and the model name to put in the
// request. Its errors are non-retryable *model.Error values: a model
// string that does not resolve now will not resolve on a retry.
func (r *Router) Resolve(s string) (model.Provider, string, error) {
	prefix, name, err := model.ParseName(s)
	if err != nil {
		return nil, "", &model.Error{Message: err.Error()}
	}
	switch prefix {
	case "openai":
		return r.openai, name, nil
	case "ollama":
		return r.ollama, name, nil
	case "anthropic":
		return r.anthropic, name, nil
	case "scripted":
		script, err := scripted.Open(name, r.cfg.ScriptDir)
		if err != nil {
			return nil, "", &model.Error{Message: err.Error()}
		}
		return scripted.New(script), name, nil
	}
	return nil, "", &model.Error{Message: fmt.Sprintf("model %q: unknown provider %q; use openai, ollama, anthropic or scripted", s, prefix)}
}
