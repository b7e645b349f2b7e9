// Package responses is the model.Provider for OpenAI's Responses API,
// through the official openai-go SDK's responses client.
//
// Unlike Chat Completions, a function_call_output takes a list of
// input_text, input_image and input_file items, so a tool's text and
// media travel together, in the order the tool returned them. Media the
// API does not take becomes a sentence in that list.
package responses

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/apierr"
	chat "github.com/tollgate-dev/tollgate/model/openai"
	"github.com/tollgate-dev/tollgate/results"
)

// DefaultBaseURL is OpenAI's own endpoint.
const DefaultBaseURL = chat.DefaultBaseURL

// KeyVar is where the worker reads the key from; errors name it.
const KeyVar = chat.KeyVar

// Config configures a Provider.
type Config struct {
	APIKey string
	// BaseURL selects another server that speaks the Responses API; empty
	// means DefaultBaseURL, which needs a key.
	BaseURL string
	// HTTPClient replaces the SDK's default client (tests, proxies).
	HTTPClient *http.Client
}

// Provider calls the Responses API. It is safe for concurrent use.
type Provider struct {
	client   openai.Client
	cfg      Config
	official bool
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider. It does not contact the server.
func New(cfg Config) *Provider {
	client, official := chat.Client(chat.Config{APIKey: cfg.APIKey, BaseURL: cfg.BaseURL, HTTPClient: cfg.HTTPClient})
	return &Provider{client: client, cfg: cfg, official: official}
}

func (p *Provider) classifier() apierr.Classifier {
	return apierr.Classifier{Provider: "responses", KeyVar: KeyVar, Secrets: []string{p.cfg.APIKey}}
}

// Complete sends one Responses request; it streams when someone listens
// for deltas on ctx.
func (p *Provider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if p.official && p.cfg.APIKey == "" {
		return model.Response{}, &model.Error{Message: "responses: " + KeyVar + " is not set"}
	}
	params, err := Params(req)
	if err != nil {
		return model.Response{}, &model.Error{Message: "responses: " + err.Error()}
	}
	capture := &apierr.Capture{}
	mw := option.WithMiddleware(capture.Middleware)
	if !model.Streaming(ctx) {
		resp, err := p.client.Responses.New(ctx, params, mw)
		if err != nil {
			return model.Response{}, p.classifier().Classify(err, capture)
		}
		return p.fromResponse(resp)
	}
	stream := p.client.Responses.NewStreaming(ctx, params, mw)
	defer stream.Close()
	var final *responses.Response
	calls := map[int64]int{} // output_index → tool call index
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: ev.Delta})
		case "response.output_item.added":
			if ev.Item.Type == "function_call" {
				fc := ev.Item.AsFunctionCall()
				i := len(calls)
				calls[ev.OutputIndex] = i
				model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: i, ToolCallID: fc.CallID, ToolName: fc.Name})
			}
		case "response.function_call_arguments.delta":
			if i, ok := calls[ev.OutputIndex]; ok {
				model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: i, Arguments: ev.Delta})
			}
		case "response.completed", "response.incomplete", "response.failed":
			r := ev.Response
			final = &r
		case "error":
			return model.Response{}, p.streamError(ev.Code, ev.Message)
		}
	}
	if err := stream.Err(); err != nil {
		return model.Response{}, p.classifier().Classify(err, capture)
	}
	if final == nil {
		return model.Response{}, &model.Error{Retryable: true, Message: "responses: the stream ended before the response was complete"}
	}
	return p.fromResponse(final)
}

// streamError classifies an error that arrives as a stream event or in a
// failed response, where there is no HTTP status to go by.
func (p *Provider) streamError(code, message string) error {
	detail := apierr.Redact(message, p.cfg.APIKey)
	switch {
	case apierr.ContextLength([]byte(code + " " + message)):
		return &model.Error{ContextLength: true, Message: "responses: the conversation is longer than the model's context window: " + detail}
	case code == "rate_limit_exceeded":
		return &model.Error{Retryable: true, Message: "responses: rate limited: " + detail}
	case code == "server_error" || code == "":
		return &model.Error{Retryable: true, Message: "responses: server error: " + detail}
	default:
		return &model.Error{Message: fmt.Sprintf("responses: the request failed (%s): %s", code, detail)}
	}
}

// Params maps a request onto the Responses API. It is exported for the
// encoding benchmark.
func Params(req model.Request) (responses.ResponseNewParams, error) {
	if req.Model == "" {
		return responses.ResponseNewParams{}, fmt.Errorf("no model name")
	}
	params := responses.ResponseNewParams{
		Model: shared.ResponsesModel(req.Model),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: inputItems(req.Messages)},
		// Every request carries the whole conversation; nothing needs to
		// be kept on OpenAI's side between calls.
		Store: openai.Bool(false),
	}
	if req.System != "" {
		params.Instructions = openai.String(req.System)
	}
	if req.Params.MaxTokens > 0 {
		params.MaxOutputTokens = openai.Int(int64(req.Params.MaxTokens))
	}
	if req.Params.Temperature != nil {
		params.Temperature = openai.Float(*req.Params.Temperature)
	}
	for _, t := range req.Tools {
		schema := map[string]any{"type": "object", "properties": map[string]any{}}
		if len(t.Schema) > 0 && string(t.Schema) != "null" {
			schema = nil
			if err := json.Unmarshal(t.Schema, &schema); err != nil {
				return params, fmt.Errorf("tool %s: schema is not a JSON object: %w", t.Name, err)
			}
		}
		fn := responses.FunctionToolParam{Name: t.Name, Parameters: schema, Strict: openai.Bool(false)}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, responses.ToolUnionParam{OfFunction: &fn})
	}
	return params, nil
}

func inputItems(msgs []results.Message) responses.ResponseInputParam {
	var out responses.ResponseInputParam
	for _, m := range msgs {
		switch m.Role {
		case results.RoleSystem:
			out = append(out, responses.ResponseInputItemParamOfMessage(m.Text(), responses.EasyInputMessageRoleSystem))
		case results.RoleUser:
			out = append(out, userItem(m.Parts))
		case results.RoleAssistant:
			if text := m.Text(); text != "" {
				out = append(out, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleAssistant))
			}
			for _, c := range m.ToolCalls {
				out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
					CallID: c.ID, Name: c.Name,
					// Sent back exactly as the model wrote it.
					Arguments: c.Arguments,
				}})
			}
		case results.RoleTool:
			out = append(out, toolOutput(m))
		}
	}
	return out
}

func userItem(parts []results.Part) responses.ResponseInputItemUnionParam {
	var content responses.ResponseInputMessageContentListParam
	hasMedia := false
	for _, p := range parts {
		hasMedia = hasMedia || p.Type == results.PartMedia
	}
	if !hasMedia {
		return responses.ResponseInputItemParamOfMessage(results.Message{Parts: parts}.Text(), responses.EasyInputMessageRoleUser)
	}
	for _, p := range parts {
		switch {
		case p.Type == results.PartText && p.Text == "":
		case p.Type == results.PartMedia && imageType(p.MediaType):
			content = append(content, responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
				ImageURL: openai.String(dataURL(p)), Detail: responses.ResponseInputImageDetailAuto,
			}})
		case p.Type == results.PartMedia && p.MediaType == "application/pdf":
			content = append(content, responses.ResponseInputContentUnionParam{OfInputFile: &responses.ResponseInputFileParam{
				FileData: openai.String(dataURL(p)), Filename: openai.String("document.pdf"),
			}})
		default:
			content = append(content, responses.ResponseInputContentUnionParam{OfInputText: &responses.ResponseInputTextParam{Text: partText(p)}})
		}
	}
	return responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
		Role:    responses.EasyInputMessageRoleUser,
		Content: responses.EasyInputMessageContentUnionParam{OfInputItemContentList: content},
	}}
}

// toolOutput is one function_call_output. Text-only output is a plain
// string (the form every Responses server takes); with media it is the
// list of items in the tool's order.
func toolOutput(m results.Message) responses.ResponseInputItemUnionParam {
	item := &responses.ResponseInputItemFunctionCallOutputParam{CallID: openai.String(m.ToolCallID)}
	hasMedia := false
	for _, p := range m.Parts {
		hasMedia = hasMedia || p.Type == results.PartMedia
	}
	if !hasMedia {
		text := m.Text()
		if text == "" {
			text = results.SilentSuccessText
			if m.IsError {
				text = `{"error":"the tool failed"}`
			}
		}
		item.Output.OfString = openai.String(text)
		return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: item}
	}
	var list responses.ResponseFunctionCallOutputItemListParam
	for _, p := range m.Parts {
		switch {
		case p.Type == results.PartText && p.Text == "":
		case p.Type == results.PartMedia && imageType(p.MediaType):
			list = append(list, responses.ResponseFunctionCallOutputItemUnionParam{OfInputImage: &responses.ResponseInputImageContentParam{
				ImageURL: openai.String(dataURL(p)),
			}})
		case p.Type == results.PartMedia && p.MediaType == "application/pdf":
			list = append(list, responses.ResponseFunctionCallOutputItemUnionParam{OfInputFile: &responses.ResponseInputFileContentParam{
				FileData: openai.String(dataURL(p)), Filename: openai.String("document.pdf"),
			}})
		default:
			list = append(list, responses.ResponseFunctionCallOutputItemUnionParam{OfInputText: &responses.ResponseInputTextContentParam{Text: partText(p)}})
		}
	}
	item.Output.OfResponseFunctionCallOutputItemArray = list
	return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: item}
}

// partText is a text or JSON part's text, or the sentence that stands in
// for media the API does not take.
func partText(p results.Part) string {
	switch p.Type {
	case results.PartJSON:
		return string(p.JSON)
	case results.PartMedia:
		return Refused(p.MediaType)
	}
	return p.Text
}

// Refused is what the model reads in place of media the API does not take.
func Refused(mediaType string) string {
	return fmt.Sprintf("[%s not shown: OpenAI Responses accepts PNG, JPEG, WebP and GIF images and PDF files only]", mediaType)
}

func imageType(t string) bool {
	switch t {
	case "image/png", "image/jpeg", "image/webp", "image/gif":
		return true
	}
	return false
}

func dataURL(p results.Part) string {
	return "data:" + p.MediaType + ";base64," + base64.StdEncoding.EncodeToString(p.Data)
}

func (p *Provider) fromResponse(r *responses.Response) (model.Response, error) {
	if r.Status == "failed" {
		return model.Response{}, p.streamError(string(r.Error.Code), r.Error.Message)
	}
	msg := results.Message{Role: results.RoleAssistant}
	for _, item := range r.Output {
		switch item.Type {
		case "message":
			for _, c := range item.AsMessage().Content {
				switch {
				case c.Type == "output_text" && c.Text != "":
					msg.Parts = append(msg.Parts, results.TextPart(c.Text))
				case c.Type == "refusal" && c.Refusal != "":
					msg.Parts = append(msg.Parts, results.TextPart(c.Refusal))
				}
			}
		case "function_call":
			fc := item.AsFunctionCall()
			args := fc.Arguments
			if args == "" {
				args = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, results.ToolCall{ID: fc.CallID, Name: fc.Name, Arguments: args})
		}
	}
	stop := model.StopEnd
	switch {
	case r.Status == "incomplete" && r.IncompleteDetails.Reason == "max_output_tokens":
		stop = model.StopMaxTokens
	case len(msg.ToolCalls) > 0:
		stop = model.StopToolCalls
	case r.Status == "incomplete":
		stop = model.StopOther
	}
	return model.Response{
		Message:    msg,
		StopReason: stop,
		Usage: model.Usage{
			InputTokens:  int(r.Usage.InputTokens),
			OutputTokens: int(r.Usage.OutputTokens),
			CachedTokens: int(r.Usage.InputTokensDetails.CachedTokens),
		},
	}, nil
}
