// Package ollama is the model.Provider for Ollama's native chat API
// (/api/chat), through Ollama's own Go client (github.com/ollama/ollama/api).
// The OpenAI-compatible route (model/openai at Ollama's /v1) stays as it
// is; this one differs where the native API does: a tool message carries
// its images itself, and a conversation longer than the context window
// is an error rather than silently cut from the front.
//
// A tool message has one text and a list of images, so the order of a
// tool's text and images is kept by marking each image's place in the
// text ("[image 1]"), the images following in the same order.
package ollama

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/ollama/ollama/api"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/apierr"
	"github.com/tollgate-dev/tollgate/results"
)

// DefaultBaseURL is where a local Ollama listens.
const DefaultBaseURL = "http://localhost:11434"

// Config configures a Provider.
type Config struct {
	// BaseURL is Ollama's address, without /v1; empty means DefaultBaseURL.
	BaseURL string
	// HTTPClient replaces the default client.
	HTTPClient *http.Client
}

// Provider calls /api/chat. It is safe for concurrent use.
type Provider struct {
	client *api.Client
	err    error
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider. It does not contact the server.
func New(cfg Config) *Provider {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err == nil && (base.Scheme == "" || base.Host == "") {
		err = fmt.Errorf("%q is not an http(s) URL", cfg.BaseURL)
	}
	if err != nil {
		return &Provider{err: &model.Error{Message: "ollama: bad base URL: " + err.Error()}}
	}
	return &Provider{client: api.NewClient(base, apierr.WrapClient(cfg.HTTPClient))}
}

var classifier = apierr.Classifier{Provider: "ollama", KeyVar: "OLLAMA_HOST"}

// Complete sends one chat request; it streams when someone listens for
// deltas on ctx.
func (p *Provider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if p.err != nil {
		return model.Response{}, p.err
	}
	chat, err := Params(req)
	if err != nil {
		return model.Response{}, &model.Error{Message: "ollama: " + err.Error()}
	}
	streaming := model.Streaming(ctx)
	chat.Stream = &streaming
	capture := &apierr.Capture{}
	ctx = apierr.WithCapture(ctx, capture)
	var text strings.Builder
	var calls []api.ToolCall
	var last api.ChatResponse
	var raw []byte
	err = p.client.Chat(ctx, chat, func(r api.ChatResponse) error {
		if r.Message.Content != "" {
			text.WriteString(r.Message.Content)
			if streaming {
				model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: r.Message.Content})
			}
		}
		for _, c := range r.Message.ToolCalls {
			if streaming {
				// Ollama sends each call whole.
				model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: len(calls), ToolCallID: c.ID, ToolName: c.Function.Name, Arguments: c.Function.Arguments.String()})
			}
			calls = append(calls, c)
		}
		if r.Done {
			last = r
			raw, _ = json.Marshal(r)
		}
		return nil
	})
	if err != nil {
		return model.Response{}, classify(err, capture)
	}
	return fromChat(text.String(), calls, last, raw), nil
}

// classify is apierr's classification, plus Ollama's context-length
// refusal, which comes as a 500 or as an error line inside a 200 stream.
func classify(err error, capture *apierr.Capture) error {
	cerr := classifier.Classify(err, capture)
	me := model.AsError(cerr)
	if !me.ContextLength && apierr.ContextLength([]byte(err.Error())) {
		return &model.Error{Status: me.Status, ContextLength: true, Message: "ollama: the conversation is longer than the model's context window: " + apierr.Redact(err.Error())}
	}
	return cerr
}

// Params maps a request onto /api/chat. It is exported for the encoding
// benchmark.
func Params(req model.Request) (*api.ChatRequest, error) {
	if req.Model == "" {
		return nil, fmt.Errorf("no model name")
	}
	no := false
	chat := &api.ChatRequest{
		Model: req.Model,
		// A turn must not lose its start to a silent cut: an error lets
		// the workflow compact the conversation instead.
		Truncate: &no,
		Options:  map[string]any{},
	}
	if req.Params.MaxTokens > 0 {
		chat.Options["num_predict"] = req.Params.MaxTokens
	}
	if req.Params.Temperature != nil {
		chat.Options["temperature"] = *req.Params.Temperature
	}
	if req.System != "" {
		chat.Messages = append(chat.Messages, api.Message{Role: "system", Content: req.System})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case results.RoleSystem:
			chat.Messages = append(chat.Messages, api.Message{Role: "system", Content: m.Text()})
		case results.RoleUser:
			content, images := split(m.Parts)
			chat.Messages = append(chat.Messages, api.Message{Role: "user", Content: content, Images: images})
		case results.RoleAssistant:
			msg := api.Message{Role: "assistant", Content: m.Text()}
			for i, c := range m.ToolCalls {
				args := api.NewToolCallFunctionArguments()
				if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
					// Arguments that are not an object were answered with
					// an error by the tool; the API needs an object.
					args = api.NewToolCallFunctionArguments()
				}
				msg.ToolCalls = append(msg.ToolCalls, api.ToolCall{ID: c.ID, Function: api.ToolCallFunction{Index: i, Name: c.Name, Arguments: args}})
			}
			chat.Messages = append(chat.Messages, msg)
		case results.RoleTool:
			content, images := split(m.Parts)
			if content == "" {
				content = results.SilentSuccessText
				if m.IsError {
					content = `{"error":"the tool failed"}`
				}
			}
			chat.Messages = append(chat.Messages, api.Message{Role: "tool", Content: content, Images: images, ToolName: m.ToolName, ToolCallID: m.ToolCallID})
		}
	}
	for _, t := range req.Tools {
		var params api.ToolFunctionParameters
		if len(t.Schema) > 0 && string(t.Schema) != "null" {
			if err := json.Unmarshal(t.Schema, &params); err != nil {
				return nil, fmt.Errorf("tool %s: schema is not a JSON object: %w", t.Name, err)
			}
		}
		if params.Type == "" {
			params.Type = "object"
		}
		if params.Properties == nil {
			params.Properties = api.NewToolPropertiesMap()
		}
		chat.Tools = append(chat.Tools, api.Tool{Type: "function", Function: api.ToolFunction{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	return chat, nil
}

// split turns ordered parts into the text and images of one message:
// each image's place in the text is marked, and media Ollama does not
// take becomes a sentence there.
func split(parts []results.Part) (string, []api.ImageData) {
	var lines []string
	var images []api.ImageData
	for _, p := range parts {
		switch {
		case p.Type == results.PartText && p.Text != "":
			lines = append(lines, p.Text)
		case p.Type == results.PartJSON:
			lines = append(lines, string(p.JSON))
		case p.Type == results.PartMedia && (p.MediaType == "image/png" || p.MediaType == "image/jpeg"):
			images = append(images, api.ImageData(p.Data))
			lines = append(lines, fmt.Sprintf("[image %d]", len(images)))
		case p.Type == results.PartMedia:
			lines = append(lines, Refused(p.MediaType))
		}
	}
	return strings.Join(lines, "\n"), images
}

// Refused is what the model reads in place of media Ollama does not take.
func Refused(mediaType string) string {
	return fmt.Sprintf("[%s not shown: Ollama accepts PNG and JPEG images only]", mediaType)
}

func fromChat(text string, calls []api.ToolCall, last api.ChatResponse, raw []byte) model.Response {
	msg := results.Message{Role: results.RoleAssistant}
	if text != "" {
		msg.Parts = []results.Part{results.TextPart(text)}
	}
	for i, c := range calls {
		id := c.ID
		if id == "" {
			// Stable across a retried activity that gets the same reply.
			sum := sha256.Sum256(append(raw, []byte(text)...))
			id = fmt.Sprintf("ollama_%s_%d", hex.EncodeToString(sum[:6]), i)
		}
		msg.ToolCalls = append(msg.ToolCalls, results.ToolCall{ID: id, Name: c.Function.Name, Arguments: c.Function.Arguments.String()})
	}
	stop := model.StopEnd
	switch {
	case last.DoneReason == "length":
		stop = model.StopMaxTokens
	case len(msg.ToolCalls) > 0:
		// Ollama reports "stop" even when the model called tools.
		stop = model.StopToolCalls
	case last.DoneReason != "" && last.DoneReason != "stop":
		stop = model.StopOther
	}
	return model.Response{
		Message:    msg,
		StopReason: stop,
		Usage:      model.Usage{InputTokens: last.PromptEvalCount, OutputTokens: last.EvalCount},
	}
}
