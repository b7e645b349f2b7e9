// Package anthropic is the model.Provider for Anthropic's Messages API,
// through the official anthropic-sdk-go.
//
// Unlike Chat Completions, Messages takes images inside a tool_result and
// has an is_error flag, so tool messages map one to one onto tool_result
// blocks; a run of them becomes one user message, as the API requires.
package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/apierr"
	"github.com/tollgate-dev/tollgate/results"
)

// DefaultMaxTokens is sent when the request sets none: the API requires
// max_tokens, and this is enough for a tool-calling step.
const DefaultMaxTokens = 4096

// KeyVar is where the worker reads the key from; errors name it.
const KeyVar = "ANTHROPIC_API_KEY"

// Config configures a Provider.
type Config struct {
	APIKey string
	// BaseURL replaces https://api.anthropic.com (a proxy, a gateway).
	BaseURL string
	// HTTPClient replaces the SDK's default client (tests, proxies).
	HTTPClient *http.Client
}

// Provider calls the Messages API. It is safe for concurrent use.
type Provider struct {
	client anthropic.Client
	cfg    Config
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider. It does not contact the server.
func New(cfg Config) *Provider {
	opts := []option.RequestOption{
		// The worker resolves its own configuration; the SDK must not add
		// credentials from the environment or a profile on disk behind it.
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(cfg.APIKey),
		// Temporal owns retries; an SDK retry inside an activity attempt
		// only hides the failure and burns the activity's timeout.
		option.WithMaxRetries(0),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Provider{client: anthropic.NewClient(opts...), cfg: cfg}
}

// Complete sends one Messages request.
func (p *Provider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if p.cfg.APIKey == "" {
		return model.Response{}, &model.Error{Message: "anthropic: " + KeyVar + " is not set"}
	}
	params, err := toParams(req)
	if err != nil {
		return model.Response{}, &model.Error{Message: "anthropic: " + err.Error()}
	}
	capture := &apierr.Capture{}
	if model.Streaming(ctx) {
		return p.stream(ctx, params, capture)
	}
	msg, err := p.client.Messages.New(ctx, params, option.WithMiddleware(capture.Middleware))
	if err != nil {
		return model.Response{}, p.classifier().Classify(err, capture)
	}
	return fromMessage(msg), nil
}

func (p *Provider) classifier() apierr.Classifier {
	return apierr.Classifier{Provider: "anthropic", KeyVar: KeyVar, Secrets: []string{p.cfg.APIKey}}
}

func toParams(req model.Request) (anthropic.MessageNewParams, error) {
	if req.Model == "" {
		return anthropic.MessageNewParams{}, fmt.Errorf("no model name")
	}
	params := anthropic.MessageNewParams{
		Model:     req.Model,
		MaxTokens: DefaultMaxTokens,
	}
	if req.Params.MaxTokens > 0 {
		params.MaxTokens = int64(req.Params.MaxTokens)
	}
	// Params.Temperature is not sent: the Messages API deprecated it and
	// this SDK no longer has the field.
	system, messages := toMessages(req.System, req.Messages)
	if system != "" {
		params.System = []anthropic.TextBlockParam{{Text: system}}
	}
	params.Messages = messages
	for _, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, tool)
	}
	return params, nil
}

func toolParam(t model.ToolDef) (anthropic.ToolUnionParam, error) {
	schema := map[string]any{}
	if len(t.Schema) > 0 && string(t.Schema) != "null" {
		if err := json.Unmarshal(t.Schema, &schema); err != nil {
			return anthropic.ToolUnionParam{}, fmt.Errorf("tool %s: schema is not a JSON object: %w", t.Name, err)
		}
	}
	in := anthropic.ToolInputSchemaParam{Properties: schema["properties"]}
	if in.Properties == nil {
		in.Properties = map[string]any{}
	}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				in.Required = append(in.Required, s)
			}
		}
	}
	// Everything else (additionalProperties, $defs, ...) goes through
	// untouched; "type" is always "object" and the SDK writes it.
	for k, v := range schema {
		switch k {
		case "type", "properties", "required":
		default:
			if in.ExtraFields == nil {
				in.ExtraFields = map[string]any{}
			}
			in.ExtraFields[k] = v
		}
	}
	tool := anthropic.ToolParam{Name: t.Name, InputSchema: in}
	if t.Description != "" {
		tool.Description = anthropic.String(t.Description)
	}
	return anthropic.ToolUnionParam{OfTool: &tool}, nil
}

// toMessages returns the system prompt (request system plus any system
// messages) and the conversation. Consecutive user-side messages (tool
// results, then a user message) share one user message, tool results
// first: the API wants every tool_result right after its tool_use turn.
func toMessages(system string, msgs []results.Message) (string, []anthropic.MessageParam) {
	var sys []string
	if system != "" {
		sys = append(sys, system)
	}
	var out []anthropic.MessageParam
	appendUser := func(blocks []anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].OfUser != nil {
			out[n-1].OfUser.Content = append(out[n-1].OfUser.Content, blocks...)
			return
		}
		out = append(out, anthropic.NewUserMessage(blocks...))
	}
	for _, m := range msgs {
		switch m.Role {
		case results.RoleSystem:
			if s := m.Text(); s != "" {
				sys = append(sys, s)
			}
		case results.RoleUser:
			appendUser(contentBlocks(m.Parts))
		case results.RoleTool:
			appendUser([]anthropic.ContentBlockParamUnion{toolResult(m)})
		case results.RoleAssistant:
			blocks := assistantBlocks(m)
			if len(blocks) == 0 {
				// The API rejects an empty assistant turn; an empty reply
				// carries nothing the model needs to see again.
				continue
			}
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		}
	}
	return strings.Join(sys, "\n\n"), out
}

func contentBlocks(parts []results.Part) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, p := range parts {
		switch p.Type {
		case results.PartText:
			// Empty text blocks are a 400.
			if p.Text != "" {
				out = append(out, anthropic.NewTextBlock(p.Text))
			}
		case results.PartJSON:
			out = append(out, anthropic.NewTextBlock(string(p.JSON)))
		case results.PartMedia:
			out = append(out, mediaBlock(p))
		}
	}
	return out
}

func mediaBlock(p results.Part) anthropic.ContentBlockParamUnion {
	data := base64.StdEncoding.EncodeToString(p.Data)
	switch p.MediaType {
	case "image/jpeg", "image/png", "image/gif", "image/webp":
		return anthropic.NewImageBlockBase64(p.MediaType, data)
	case "application/pdf":
		return anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: data})
	}
	return anthropic.NewTextBlock(fmt.Sprintf("[%s not shown: this provider accepts images and PDFs only]", p.MediaType))
}

func toolResult(m results.Message) anthropic.ContentBlockParamUnion {
	block := anthropic.ToolResultBlockParam{ToolUseID: m.ToolCallID}
	if m.IsError {
		block.IsError = anthropic.Bool(true)
	}
	for _, b := range contentBlocks(m.Parts) {
		switch {
		case b.OfText != nil:
			block.Content = append(block.Content, anthropic.ToolResultBlockParamContentUnion{OfText: b.OfText})
		case b.OfImage != nil:
			block.Content = append(block.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: b.OfImage})
		case b.OfDocument != nil:
			block.Content = append(block.Content, anthropic.ToolResultBlockParamContentUnion{OfDocument: b.OfDocument})
		}
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: &block}
}

func assistantBlocks(m results.Message) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for _, p := range m.Parts {
		var s string
		switch p.Type {
		case results.PartText:
			s = p.Text
		case results.PartJSON:
			s = string(p.JSON)
		}
		if strings.TrimSpace(s) != "" {
			out = append(out, anthropic.NewTextBlock(s))
		}
	}
	for _, c := range m.ToolCalls {
		out = append(out, anthropic.NewToolUseBlock(c.ID, toolInput(c.Arguments), c.Name))
	}
	return out
}

// toolInput is the stored arguments as the JSON object the API demands.
// Arguments the model wrote that are not an object (cut short, or plain
// wrong) become {}: the tool already answered that call with an error, and
// refusing to send the conversation would end the turn over it.
func toolInput(raw string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(raw), &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(raw)
}

func fromMessage(m *anthropic.Message) model.Response {
	msg := results.Message{Role: results.RoleAssistant}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				msg.Parts = append(msg.Parts, results.TextPart(b.Text))
			}
		case "tool_use":
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, results.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	u := m.Usage
	return model.Response{
		Message:    msg,
		StopReason: stopReason(m.StopReason, len(msg.ToolCalls) > 0),
		Usage: model.Usage{
			// Cached tokens are reported apart from input_tokens; they
			// were still read.
			InputTokens:  int(u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens),
			OutputTokens: int(u.OutputTokens),
			CachedTokens: int(u.CacheReadInputTokens),
		},
	}
}

func stopReason(r anthropic.StopReason, hasCalls bool) model.StopReason {
	switch r {
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		return model.StopMaxTokens
	case anthropic.StopReasonToolUse:
		return model.StopToolCalls
	case anthropic.StopReasonEndTurn, anthropic.StopReasonStopSequence:
		if hasCalls {
			return model.StopToolCalls
		}
		return model.StopEnd
	default:
		return model.StopOther
	}
}
