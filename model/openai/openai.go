// Package openai is the model.Provider for OpenAI's Chat Completions API
// and the many servers that speak it (Ollama, vLLM, llama.cpp, LM Studio,
// OpenRouter), through the official openai-go SDK.
//
// Chat Completions tool messages carry text only, so media a tool
// returned travels in one user message right after the tool results
// (results.SplitMedia), and an error result is sent as its error JSON,
// since the API has no error flag.
package openai

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/apierr"
	"github.com/tollgate-dev/tollgate/results"
)

// DefaultBaseURL is OpenAI's own endpoint, the only one that needs a key.
const DefaultBaseURL = "https://api.openai.com/v1"

// KeyVar is where the worker reads the key from; errors name it.
const KeyVar = "OPENAI_API_KEY"

// Config configures a Provider. Zero values mean OpenAI with no key.
type Config struct {
	APIKey string
	// BaseURL selects an OpenAI-compatible server, for example
	// http://localhost:11434/v1 for Ollama. Empty means DefaultBaseURL.
	BaseURL string
	// HTTPClient replaces the SDK's default client (tests, proxies).
	HTTPClient *http.Client
	// KeyVar overrides the variable named in key errors.
	KeyVar string
}

// Provider calls Chat Completions. It is safe for concurrent use.
type Provider struct {
	client   openai.Client
	cfg      Config
	official bool
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider. It does not contact the server.
func New(cfg Config) *Provider {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.KeyVar == "" {
		cfg.KeyVar = KeyVar
	}
	client, official := Client(cfg)
	return &Provider{client: client, cfg: cfg, official: official}
}

// Client is the SDK client for cfg, as every provider that speaks one of
// OpenAI's APIs builds it, and whether it is OpenAI's own endpoint (the
// only one that needs a key).
func Client(cfg Config) (client openai.Client, official bool) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		// Always set, even empty: otherwise the SDK falls back to
		// OPENAI_API_KEY from the environment and would send an OpenAI key
		// to whatever server the base URL names.
		option.WithAPIKey(cfg.APIKey),
		// Temporal owns retries; an SDK retry inside an activity attempt
		// only hides the failure and burns the activity's timeout.
		option.WithMaxRetries(0),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return openai.NewClient(opts...), strings.TrimRight(cfg.BaseURL, "/") == DefaultBaseURL
}

// Complete sends one Chat Completions request.
func (p *Provider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if p.official && p.cfg.APIKey == "" {
		return model.Response{}, &model.Error{Message: fmt.Sprintf("openai: %s is not set; set it, or point OPENAI_BASE_URL at a server that needs no key", p.cfg.KeyVar)}
	}
	params, err := p.params(req)
	if err != nil {
		return model.Response{}, &model.Error{Message: "openai: " + err.Error()}
	}
	capture := &apierr.Capture{}
	if model.Streaming(ctx) {
		return p.stream(ctx, params, capture)
	}
	completion, err := p.client.Chat.Completions.New(ctx, params, option.WithMiddleware(capture.Middleware))
	if err != nil {
		return model.Response{}, p.classifier().Classify(err, capture)
	}
	return p.fromCompletion(completion)
}

// noChoices explains a success status without a choice. Gateways such as
// OpenRouter report an upstream failure that way, with an error object in
// the body; that is worth a retry. An empty answer with no error is not.
func (p *Provider) noChoices(c *openai.ChatCompletion) error {
	if c != nil {
		var body struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal([]byte(c.RawJSON()), &body) == nil && len(body.Error) > 0 && string(body.Error) != "null" {
			detail := apierr.Redact(apierr.Describe([]byte(c.RawJSON())), p.cfg.APIKey)
			return &model.Error{Retryable: true, Message: "openai: the server reported an error instead of a reply: " + detail}
		}
	}
	return &model.Error{Message: "openai: the response has no choices"}
}

func (p *Provider) classifier() apierr.Classifier {
	return apierr.Classifier{Provider: "openai", KeyVar: p.cfg.KeyVar, Secrets: []string{p.cfg.APIKey}}
}

func (p *Provider) params(req model.Request) (openai.ChatCompletionNewParams, error) {
	if req.Model == "" {
		return openai.ChatCompletionNewParams{}, fmt.Errorf("no model name")
	}
	params := openai.ChatCompletionNewParams{
		Model:    shared.ChatModel(req.Model),
		Messages: toMessages(req.System, req.Messages),
	}
	for _, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, tool)
	}
	if req.Params.MaxTokens > 0 {
		// OpenAI deprecated max_tokens (its reasoning models reject it),
		// while many compatible servers only know max_tokens.
		if p.official {
			params.MaxCompletionTokens = openai.Int(int64(req.Params.MaxTokens))
		} else {
			params.MaxTokens = openai.Int(int64(req.Params.MaxTokens))
		}
	}
	if req.Params.Temperature != nil {
		params.Temperature = openai.Float(*req.Params.Temperature)
	}
	return params, nil
}

func toolParam(t model.ToolDef) (openai.ChatCompletionToolUnionParam, error) {
	schema := map[string]any{"type": "object", "properties": map[string]any{}}
	if len(t.Schema) > 0 && string(t.Schema) != "null" {
		schema = nil
		if err := json.Unmarshal(t.Schema, &schema); err != nil {
			return openai.ChatCompletionToolUnionParam{}, fmt.Errorf("tool %s: schema is not a JSON object: %w", t.Name, err)
		}
	}
	def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
	if t.Description != "" {
		def.Description = openai.String(t.Description)
	}
	return openai.ChatCompletionFunctionTool(def), nil
}

// toMessages maps a conversation onto Chat Completions messages: the system
// prompt first, then each message in order, with each run of tool messages
// followed by one user message carrying their media.
func toMessages(system string, msgs []results.Message) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if system != "" {
		out = append(out, openai.SystemMessage(system))
	}
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case results.RoleSystem:
			out = append(out, openai.SystemMessage(m.Text()))
		case results.RoleUser:
			out = append(out, userMessage(m.Parts))
		case results.RoleAssistant:
			out = append(out, assistantMessage(m))
		case results.RoleTool:
			j := i
			for j < len(msgs) && msgs[j].Role == results.RoleTool {
				j++
			}
			tools, media := results.SplitMedia(msgs[i:j])
			for _, t := range tools {
				out = append(out, openai.ToolMessage(toolText(t), t.ToolCallID))
			}
			if media != nil {
				out = append(out, userMessage(media.Parts))
			}
			i = j - 1
		}
	}
	return out
}

// toolText is what a tool message says. Errors are already rendered as
// {"error": ...} by results.Render; an empty body is replaced because
// several servers reject an empty tool message.
func toolText(m results.Message) string {
	if s := m.Text(); s != "" {
		return s
	}
	if m.IsError {
		return `{"error":"the tool failed"}`
	}
	return results.SilentSuccessText
}

func userMessage(parts []results.Part) openai.ChatCompletionMessageParamUnion {
	hasMedia := false
	for _, p := range parts {
		hasMedia = hasMedia || p.Type == results.PartMedia
	}
	if !hasMedia {
		// Plain string content: the form every compatible server accepts.
		return openai.UserMessage(results.Message{Parts: parts}.Text())
	}
	var content []openai.ChatCompletionContentPartUnionParam
	for _, p := range parts {
		switch p.Type {
		case results.PartText:
			if p.Text != "" {
				content = append(content, openai.TextContentPart(p.Text))
			}
		case results.PartJSON:
			content = append(content, openai.TextContentPart(string(p.JSON)))
		case results.PartMedia:
			if strings.HasPrefix(p.MediaType, "image/") {
				content = append(content, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{
					URL: "data:" + p.MediaType + ";base64," + base64.StdEncoding.EncodeToString(p.Data),
				}))
			} else {
				content = append(content, openai.TextContentPart(fmt.Sprintf("[%s not shown: this provider accepts only images]", p.MediaType)))
			}
		}
	}
	return openai.UserMessage(content)
}

func assistantMessage(m results.Message) openai.ChatCompletionMessageParamUnion {
	var a openai.ChatCompletionAssistantMessageParam
	if text := m.Text(); text != "" || len(m.ToolCalls) == 0 {
		a.Content.OfString = openai.String(text)
	}
	for _, c := range m.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: c.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name: c.Name,
					// Sent back exactly as the model wrote it, valid JSON or not.
					Arguments: c.Arguments,
				},
			},
		})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

func (p *Provider) fromCompletion(c *openai.ChatCompletion) (model.Response, error) {
	if c == nil || len(c.Choices) == 0 {
		return model.Response{}, p.noChoices(c)
	}
	choice := c.Choices[0]
	msg := results.Message{Role: results.RoleAssistant}
	switch {
	case choice.Message.Content != "":
		msg.Parts = append(msg.Parts, results.TextPart(choice.Message.Content))
	case choice.Message.Refusal != "":
		msg.Parts = append(msg.Parts, results.TextPart(choice.Message.Refusal))
	}
	for i, tc := range choice.Message.ToolCalls {
		call := results.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
		if tc.Type == "custom" {
			call.Name, call.Arguments = tc.Custom.Name, tc.Custom.Input
		}
		if call.ID == "" {
			// Some local servers omit ids, but every call needs one that is
			// unique in the turn and the same if the activity is retried.
			call.ID = syntheticID(c, i)
		}
		msg.ToolCalls = append(msg.ToolCalls, call)
	}
	return model.Response{
		Message:    msg,
		StopReason: stopReason(choice.FinishReason, len(msg.ToolCalls) > 0),
		Usage: model.Usage{
			InputTokens:  int(c.Usage.PromptTokens),
			OutputTokens: int(c.Usage.CompletionTokens),
			CachedTokens: int(c.Usage.PromptTokensDetails.CachedTokens),
		},
	}, nil
}

func syntheticID(c *openai.ChatCompletion, i int) string {
	seed := c.ID
	if seed == "" {
		sum := sha256.Sum256([]byte(c.RawJSON()))
		seed = hex.EncodeToString(sum[:6])
	}
	return fmt.Sprintf("call_%s_%d", seed, i)
}

func stopReason(finish string, hasCalls bool) model.StopReason {
	switch {
	case finish == "length":
		return model.StopMaxTokens
	case hasCalls:
		// Ollama and others report "stop" even when the model called tools.
		return model.StopToolCalls
	case finish == "stop" || finish == "":
		return model.StopEnd
	default:
		return model.StopOther
	}
}
