// Package model is the provider-neutral model interface CallModel speaks:
// a Request (system prompt, conversation, tool definitions, parameters), a
// Response (the assistant message with its tool calls, stop reason, token
// usage), the Provider interface each backend implements, and errors that
// say whether a failure is worth retrying.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/results"
)

// ToolDef is a tool as the model sees it.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
}

// Params are optional generation parameters; zero means provider default.
type Params struct {
	MaxTokens   int      `json:"max_tokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
}

// Request is one model call.
type Request struct {
	// Model is the provider's model name, without the "provider:" prefix.
	Model    string            `json:"model"`
	System   string            `json:"system,omitempty"`
	Messages []results.Message `json:"messages"`
	Tools    []ToolDef         `json:"tools,omitempty"`
	Params   Params            `json:"params,omitempty"`
}

// StopReason says why the model stopped.
type StopReason string

const (
	StopEnd       StopReason = "end"
	StopToolCalls StopReason = "tool_calls"
	StopMaxTokens StopReason = "max_tokens"
	StopOther     StopReason = "other"
)

// Usage counts tokens.
type Usage struct {
	// InputTokens counts every token the model read, cached ones included.
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CachedTokens is the part of InputTokens the provider served from its
	// prompt cache (billed lower). Omitted when zero, so turns recorded
	// before it existed encode as they did.
	CachedTokens int `json:"cached_tokens,omitempty"`
}

// Response is the model's reply: an assistant message with text parts and
// tool calls (arguments as the model's raw text).
type Response struct {
	Message    results.Message `json:"message"`
	StopReason StopReason      `json:"stop_reason"`
	Usage      Usage           `json:"usage"`
}

// Provider is one model backend.
type Provider interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// Error is a classified provider failure. Message never contains a key.
type Error struct {
	// Retryable is true for rate limits, 5xx and timeouts.
	Retryable bool
	// RetryAfter is the provider's Retry-After, when it sent one.
	RetryAfter time.Duration
	// Status is the HTTP status, when there was one.
	Status int
	// ContextLength is true when the provider refused the request because
	// the conversation does not fit the model's context window: not worth
	// a retry as it is, but a shorter (compacted) conversation may pass.
	ContextLength bool
	Message       string
}

// ErrContextLength matches, with errors.Is, any *Error whose
// ContextLength is set.
var ErrContextLength = errors.New("the conversation is longer than the model's context window")

// Is makes errors.Is(err, ErrContextLength) see through a classified error.
func (e *Error) Is(target error) bool {
	return target == ErrContextLength && e.ContextLength
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("model provider returned %d: %s", e.Status, e.Message)
	}
	return "model provider: " + e.Message
}

// AsError extracts a classified error. Unclassified errors are treated as
// retryable: a transport failure is usually transient.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Retryable: true, Message: err.Error()}
}

// ParseName splits "provider:name" (the name may itself hold colons, as in
// "scripted:path/to/file.json" or "openai:llama3:8b").
func ParseName(s string) (provider, name string, err error) {
	provider, name, ok := strings.Cut(s, ":")
	if !ok || provider == "" || name == "" {
		return "", "", fmt.Errorf("model %q must be provider:name, for example openai:gpt-4.1, anthropic:claude-sonnet-4-5 or scripted:demo", s)
	}
	return provider, name, nil
}
