// Package gemini is the model.Provider for Google's Gemini models, on the
// Gemini API or on Vertex AI, through the official google.golang.org/genai
// SDK.
//
// A functionResponse carries a JSON object and media parts, so a tool's
// text goes in response.output and its media in the function response's
// parts. When a tool returned both, output is a list that keeps the
// tool's order: text pieces as strings, each media piece as
// {"$ref": "<displayName>"} naming its part, as the API's multimodal
// function responses define.
package gemini

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
	"cloud.google.com/go/auth/httptransport"
	"google.golang.org/genai"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/apierr"
	"github.com/tollgate-dev/tollgate/results"
)

// KeyVar is where the worker reads the Gemini API key from; errors name it.
const KeyVar = "GEMINI_API_KEY"

// Config configures a Provider: an API key for the Gemini API, or Vertex
// with a project and location for Vertex AI.
type Config struct {
	// APIKey is the Gemini API key.
	APIKey string
	// Vertex selects Vertex AI: Project and Location name the endpoint
	// and the credentials are Credentials, or else Application Default
	// Credentials.
	Vertex            bool
	Project, Location string
	Credentials       *auth.Credentials
	// BaseURL replaces the backend's endpoint (tests, a proxy).
	BaseURL string
	// HTTPClient replaces the default client. On Vertex AI a client given
	// here must authenticate its requests itself.
	HTTPClient *http.Client
	// Transport is, on Vertex AI without HTTPClient, what the
	// authenticating client sends through (tracing, a proxy); nil means
	// the default transport.
	Transport http.RoundTripper
}

// Provider calls generateContent. It is safe for concurrent use.
type Provider struct {
	cfg    Config
	name   string
	mu     sync.Mutex
	client *genai.Client
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider. It does not contact the server; the client is
// made at the first call, so missing credentials are that call's error.
func New(cfg Config) *Provider {
	name := "gemini"
	if cfg.Vertex {
		name = "vertex"
	}
	return &Provider{cfg: cfg, name: name}
}

func (p *Provider) classifier() apierr.Classifier {
	keyVar := KeyVar
	if p.cfg.Vertex {
		keyVar = "the Application Default Credentials"
	}
	return apierr.Classifier{Provider: p.name, KeyVar: keyVar, Secrets: []string{p.cfg.APIKey}}
}

func (p *Provider) getClient(ctx context.Context) (*genai.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != nil {
		return p.client, nil
	}
	cc := &genai.ClientConfig{
		HTTPOptions: genai.HTTPOptions{BaseURL: p.cfg.BaseURL},
	}
	hc := p.cfg.HTTPClient
	if p.cfg.Vertex {
		if p.cfg.Project == "" || p.cfg.Location == "" {
			return nil, &model.Error{Message: "vertex: GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION must be set"}
		}
		cc.Backend, cc.Project, cc.Location = genai.BackendVertexAI, p.cfg.Project, p.cfg.Location
		if hc == nil {
			// The SDK authenticates only a client it makes itself; this
			// one is made here so that its exchanges can be classified.
			creds := p.cfg.Credentials
			if creds == nil {
				var err error
				creds, err = credentials.DetectDefault(&credentials.DetectOptions{Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}})
				if err != nil {
					return nil, &model.Error{Message: "vertex: no Application Default Credentials: " + err.Error()}
				}
			}
			var err error
			hc, err = httptransport.NewClient(&httptransport.Options{Credentials: creds, BaseRoundTripper: p.cfg.Transport})
			if err != nil {
				return nil, &model.Error{Message: "vertex: " + err.Error()}
			}
		}
	} else {
		if p.cfg.APIKey == "" {
			return nil, &model.Error{Message: "gemini: " + KeyVar + " is not set"}
		}
		cc.Backend, cc.APIKey = genai.BackendGeminiAPI, p.cfg.APIKey
	}
	cc.HTTPClient = apierr.WrapClient(hc)
	client, err := genai.NewClient(ctx, cc)
	if err != nil {
		return nil, &model.Error{Message: apierr.Redact(p.name+": "+err.Error(), p.cfg.APIKey)}
	}
	p.client = client
	return client, nil
}

// Complete sends one generateContent request, streaming when someone
// listens for deltas on ctx.
func (p *Provider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	client, err := p.getClient(ctx)
	if err != nil {
		return model.Response{}, err
	}
	contents, config, err := Params(req)
	if err != nil {
		return model.Response{}, &model.Error{Message: p.name + ": " + err.Error()}
	}
	capture := &apierr.Capture{}
	ctx = apierr.WithCapture(ctx, capture)
	if !model.Streaming(ctx) {
		resp, err := client.Models.GenerateContent(ctx, req.Model, contents, config)
		if err != nil {
			return model.Response{}, p.classifier().Classify(err, capture)
		}
		return p.fromResponses([]*genai.GenerateContentResponse{resp})
	}
	var chunks []*genai.GenerateContentResponse
	calls := 0
	for chunk, err := range client.Models.GenerateContentStream(ctx, req.Model, contents, config) {
		if err != nil {
			return model.Response{}, p.classifier().Classify(err, capture)
		}
		chunks = append(chunks, chunk)
		for _, part := range firstParts(chunk) {
			switch {
			case part.Thought:
			case part.Text != "":
				model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: part.Text})
			case part.FunctionCall != nil:
				// Gemini streams each call whole.
				args, _ := json.Marshal(part.FunctionCall.Args)
				model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: calls, ToolCallID: callID(part.FunctionCall.ID, chunks[0], calls), ToolName: part.FunctionCall.Name, Arguments: string(args)})
				calls++
			}
		}
	}
	return p.fromResponses(chunks)
}

func firstParts(r *genai.GenerateContentResponse) []*genai.Part {
	if r == nil || len(r.Candidates) == 0 || r.Candidates[0].Content == nil {
		return nil
	}
	return r.Candidates[0].Content.Parts
}

// skipSignature is the thought signature Google documents for function
// calls the caller cannot replay a real signature for (Tollgate keeps
// calls provider-neutral): Gemini 3 models then skip the check instead
// of refusing the conversation.
var skipSignature, _ = base64.URLEncoding.DecodeString("skip_thought_signature_validator")

// syntheticPrefix marks call IDs Tollgate made up because the model sent
// none; they are never sent back as the API's own IDs.
const syntheticPrefix = "gemini_"

// Params maps a request onto generateContent's contents and config. It
// is exported for the encoding benchmark.
func Params(req model.Request) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	if req.Model == "" {
		return nil, nil, fmt.Errorf("no model name")
	}
	config := &genai.GenerateContentConfig{}
	var system []string
	if req.System != "" {
		system = append(system, req.System)
	}
	if req.Params.MaxTokens > 0 {
		config.MaxOutputTokens = int32(req.Params.MaxTokens)
	}
	if req.Params.Temperature != nil {
		t := float32(*req.Params.Temperature)
		config.Temperature = &t
	}
	if len(req.Tools) > 0 {
		tool := &genai.Tool{}
		for _, t := range req.Tools {
			var schema any = map[string]any{"type": "object", "properties": map[string]any{}}
			if len(t.Schema) > 0 && string(t.Schema) != "null" {
				var obj map[string]any
				if err := json.Unmarshal(t.Schema, &obj); err != nil {
					return nil, nil, fmt.Errorf("tool %s: schema is not a JSON object: %w", t.Name, err)
				}
				schema = obj
			}
			tool.FunctionDeclarations = append(tool.FunctionDeclarations, &genai.FunctionDeclaration{
				Name: t.Name, Description: t.Description, ParametersJsonSchema: schema,
			})
		}
		config.Tools = []*genai.Tool{tool}
	}
	var out []*genai.Content
	// Function responses and the user message after them share one user
	// content: the API wants every response of a step in the turn right
	// after the model's calls.
	appendUser := func(parts []*genai.Part) {
		if len(parts) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == genai.RoleUser {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
			return
		}
		out = append(out, &genai.Content{Role: genai.RoleUser, Parts: parts})
	}
	for _, m := range req.Messages {
		switch m.Role {
		case results.RoleSystem:
			if s := m.Text(); s != "" {
				system = append(system, s)
			}
		case results.RoleUser:
			appendUser(userParts(m.Parts))
		case results.RoleTool:
			appendUser([]*genai.Part{{FunctionResponse: functionResponse(m)}})
		case results.RoleAssistant:
			var parts []*genai.Part
			if text := m.Text(); strings.TrimSpace(text) != "" {
				parts = append(parts, &genai.Part{Text: text})
			}
			for i, c := range m.ToolCalls {
				fc := &genai.FunctionCall{Name: c.Name, Args: args(c.Arguments)}
				if !strings.HasPrefix(c.ID, syntheticPrefix) {
					fc.ID = c.ID
				}
				part := &genai.Part{FunctionCall: fc}
				if i == 0 {
					part.ThoughtSignature = skipSignature
				}
				parts = append(parts, part)
			}
			if len(parts) > 0 {
				out = append(out, &genai.Content{Role: genai.RoleModel, Parts: parts})
			}
		}
	}
	if len(system) > 0 {
		config.SystemInstruction = &genai.Content{Parts: []*genai.Part{{Text: strings.Join(system, "\n\n")}}}
	}
	return out, config, nil
}

// args is the stored arguments as the object the API demands; arguments
// that are not an object (the model's own mistake, already answered with
// an error by the tool) become {}.
func args(raw string) map[string]any {
	var obj map[string]any
	if json.Unmarshal([]byte(raw), &obj) != nil || obj == nil {
		return map[string]any{}
	}
	return obj
}

func userParts(parts []results.Part) []*genai.Part {
	var out []*genai.Part
	for _, p := range parts {
		switch {
		case p.Type == results.PartText && p.Text != "":
			out = append(out, &genai.Part{Text: p.Text})
		case p.Type == results.PartJSON:
			out = append(out, &genai.Part{Text: string(p.JSON)})
		case p.Type == results.PartMedia && userType(p.MediaType):
			out = append(out, &genai.Part{InlineData: &genai.Blob{MIMEType: p.MediaType, Data: p.Data}})
		case p.Type == results.PartMedia:
			out = append(out, &genai.Part{Text: Refused(p.MediaType)})
		}
	}
	return out
}

// functionResponse is one tool message. Text alone is {"output": text}
// ({"error": text} for a failed call); with media, output lists the
// pieces in order and each media piece refers to its part.
func functionResponse(m results.Message) *genai.FunctionResponse {
	fr := &genai.FunctionResponse{Name: m.ToolName}
	if !strings.HasPrefix(m.ToolCallID, syntheticPrefix) {
		fr.ID = m.ToolCallID
	}
	key := "output"
	if m.IsError {
		key = "error"
	}
	hasMedia := false
	for _, p := range m.Parts {
		hasMedia = hasMedia || p.Type == results.PartMedia
	}
	if !hasMedia {
		text := m.Text()
		if text == "" && !m.IsError {
			text = results.SilentSuccessText
		}
		fr.Response = map[string]any{key: text}
		return fr
	}
	var pieces []any
	for i, p := range m.Parts {
		switch {
		case p.Type == results.PartText && p.Text != "":
			pieces = append(pieces, p.Text)
		case p.Type == results.PartJSON:
			pieces = append(pieces, string(p.JSON))
		case p.Type == results.PartMedia && responseType(p.MediaType):
			name := fmt.Sprintf("%s_%d", m.ToolCallID, i)
			pieces = append(pieces, map[string]any{"$ref": name})
			fr.Parts = append(fr.Parts, &genai.FunctionResponsePart{InlineData: &genai.FunctionResponseBlob{MIMEType: p.MediaType, Data: p.Data, DisplayName: name}})
		case p.Type == results.PartMedia:
			pieces = append(pieces, Refused(p.MediaType))
		}
	}
	fr.Response = map[string]any{key: pieces}
	return fr
}

// Refused is what the model reads in place of media the API does not take.
func Refused(mediaType string) string {
	return fmt.Sprintf("[%s not shown: Gemini accepts PNG, JPEG and WebP images, PDF and plain text in tool results, and also audio and video from the user]", mediaType)
}

// responseType is what a function response's parts may hold.
func responseType(t string) bool {
	switch t {
	case "image/png", "image/jpeg", "image/webp", "application/pdf", "text/plain":
		return true
	}
	return false
}

// userType is what a user content's inline data may hold.
func userType(t string) bool {
	return responseType(t) || t == "image/heic" || t == "image/heif" ||
		strings.HasPrefix(t, "audio/") || strings.HasPrefix(t, "video/")
}

func callID(id string, first *genai.GenerateContentResponse, i int) string {
	if id != "" {
		return id
	}
	// Stable across a retried activity that receives the same reply.
	seed := ""
	if first != nil {
		seed = first.ResponseID
	}
	if seed == "" {
		b, _ := json.Marshal(firstParts(first))
		sum := sha256.Sum256(b)
		seed = hex.EncodeToString(sum[:6])
	}
	return fmt.Sprintf("%s%s_%d", syntheticPrefix, seed, i)
}

// fromResponses folds one reply, or the chunks of a streamed one, into a
// Response.
func (p *Provider) fromResponses(chunks []*genai.GenerateContentResponse) (model.Response, error) {
	msg := results.Message{Role: results.RoleAssistant}
	var text strings.Builder
	var finish genai.FinishReason
	var usage *genai.GenerateContentResponseUsageMetadata
	var blocked string
	for _, c := range chunks {
		if c == nil {
			continue
		}
		if c.UsageMetadata != nil {
			usage = c.UsageMetadata
		}
		if c.PromptFeedback != nil && c.PromptFeedback.BlockReason != "" {
			blocked = string(c.PromptFeedback.BlockReason)
		}
		if len(c.Candidates) > 0 && c.Candidates[0].FinishReason != "" {
			finish = c.Candidates[0].FinishReason
		}
		for _, part := range firstParts(c) {
			switch {
			case part.Thought:
			case part.Text != "":
				text.WriteString(part.Text)
			case part.FunctionCall != nil:
				a, _ := json.Marshal(part.FunctionCall.Args)
				if part.FunctionCall.Args == nil {
					a = []byte("{}")
				}
				msg.ToolCalls = append(msg.ToolCalls, results.ToolCall{
					ID: callID(part.FunctionCall.ID, chunks[0], len(msg.ToolCalls)), Name: part.FunctionCall.Name, Arguments: string(a),
				})
			}
		}
	}
	if blocked != "" && text.Len() == 0 && len(msg.ToolCalls) == 0 {
		return model.Response{}, &model.Error{Message: fmt.Sprintf("%s: the prompt was blocked (%s)", p.name, blocked)}
	}
	if text.Len() > 0 {
		msg.Parts = []results.Part{results.TextPart(text.String())}
	}
	stop := model.StopEnd
	switch {
	case finish == genai.FinishReasonMaxTokens:
		stop = model.StopMaxTokens
	case len(msg.ToolCalls) > 0:
		stop = model.StopToolCalls
	case finish != "" && finish != genai.FinishReasonStop:
		stop = model.StopOther
	}
	resp := model.Response{Message: msg, StopReason: stop}
	if usage != nil {
		resp.Usage = model.Usage{
			InputTokens:  int(usage.PromptTokenCount + usage.ToolUsePromptTokenCount),
			OutputTokens: int(usage.CandidatesTokenCount + usage.ThoughtsTokenCount),
			CachedTokens: int(usage.CachedContentTokenCount),
		}
	}
	return resp, nil
}
