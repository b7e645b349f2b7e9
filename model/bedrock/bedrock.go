// Package bedrock is the model.Provider for Amazon Bedrock's Converse API,
// through the official aws-sdk-go-v2 bedrockruntime client. Credentials
// and region come from the AWS SDK's default chain (environment, shared
// config and credentials files, SSO, web identity, container and instance
// roles).
//
// A toolResult takes text, image, document and json blocks, so a tool's
// text and media travel together in their order; a run of tool results
// shares one user message, as the API requires.
package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/internal/apierr"
	"github.com/tollgate-dev/tollgate/results"
)

// Config configures a Provider. Zero values mean the default chain's
// region and credentials and Bedrock's own endpoint.
type Config struct {
	// Region overrides the default chain's region (AWS_REGION).
	Region string
	// Credentials replaces the default chain (tests).
	Credentials aws.CredentialsProvider
	// BaseURL replaces the regional endpoint (a VPC endpoint, tests).
	BaseURL string
	// HTTPClient replaces the SDK's default client.
	HTTPClient *http.Client
}

// Provider calls Converse. It is safe for concurrent use.
type Provider struct {
	cfg    Config
	mu     sync.Mutex
	client *bedrockruntime.Client
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider. It does not contact AWS; the default chain is
// read at the first call, so a missing region is that call's error.
func New(cfg Config) *Provider { return &Provider{cfg: cfg} }

var classifier = apierr.Classifier{Provider: "bedrock", KeyVar: "the AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID or a role)"}

func (p *Provider) getClient(ctx context.Context) (*bedrockruntime.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client != nil {
		return p.client, nil
	}
	var opts []func(*config.LoadOptions) error
	if p.cfg.Region != "" {
		opts = append(opts, config.WithRegion(p.cfg.Region))
	}
	if p.cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(p.cfg.Credentials))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, &model.Error{Message: "bedrock: cannot load the AWS configuration: " + err.Error()}
	}
	if awsCfg.Region == "" {
		return nil, &model.Error{Message: "bedrock: no AWS region; set AWS_REGION"}
	}
	p.client = bedrockruntime.NewFromConfig(awsCfg, func(o *bedrockruntime.Options) {
		o.HTTPClient = apierr.WrapClient(p.cfg.HTTPClient)
		// Temporal owns retries.
		o.Retryer = aws.NopRetryer{}
		if p.cfg.BaseURL != "" {
			o.BaseEndpoint = aws.String(p.cfg.BaseURL)
		}
	})
	return p.client, nil
}

// Complete sends one Converse request, or ConverseStream when someone
// listens for deltas on ctx.
func (p *Provider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	client, err := p.getClient(ctx)
	if err != nil {
		return model.Response{}, err
	}
	in, err := Params(req)
	if err != nil {
		return model.Response{}, &model.Error{Message: "bedrock: " + err.Error()}
	}
	capture := &apierr.Capture{}
	ctx = apierr.WithCapture(ctx, capture)
	if !model.Streaming(ctx) {
		out, err := client.Converse(ctx, in)
		if err != nil {
			return model.Response{}, classifier.Classify(err, capture)
		}
		msg, _ := out.Output.(*types.ConverseOutputMemberMessage)
		if msg == nil {
			return model.Response{}, &model.Error{Retryable: true, Message: "bedrock: the response has no message"}
		}
		return fromMessage(msg.Value.Content, out.StopReason, out.Usage), nil
	}
	return p.stream(ctx, client, in, capture)
}

func (p *Provider) stream(ctx context.Context, client *bedrockruntime.Client, in *bedrockruntime.ConverseInput, capture *apierr.Capture) (model.Response, error) {
	out, err := client.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{
		ModelId: in.ModelId, Messages: in.Messages, System: in.System,
		ToolConfig: in.ToolConfig, InferenceConfig: in.InferenceConfig,
	})
	if err != nil {
		return model.Response{}, classifier.Classify(err, capture)
	}
	es := out.GetStream()
	defer es.Close()
	// Blocks by their index, in the order they started.
	type block struct {
		text       strings.Builder
		id, name   string
		input      strings.Builder
		isTool     bool
		callNumber int
	}
	blocks := map[int32]*block{}
	var order []int32
	get := func(i int32) *block {
		b, ok := blocks[i]
		if !ok {
			b = &block{}
			blocks[i] = b
			order = append(order, i)
		}
		return b
	}
	calls := 0
	var stop types.StopReason
	var usage *types.TokenUsage
	for ev := range es.Events() {
		switch e := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			if tu, ok := e.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				b := get(aws.ToInt32(e.Value.ContentBlockIndex))
				b.isTool, b.id, b.name, b.callNumber = true, aws.ToString(tu.Value.ToolUseId), aws.ToString(tu.Value.Name), calls
				calls++
				model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: b.callNumber, ToolCallID: b.id, ToolName: b.name})
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			b := get(aws.ToInt32(e.Value.ContentBlockIndex))
			switch d := e.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				b.text.WriteString(d.Value)
				model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: d.Value})
			case *types.ContentBlockDeltaMemberToolUse:
				piece := aws.ToString(d.Value.Input)
				b.input.WriteString(piece)
				if b.isTool {
					model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: b.callNumber, Arguments: piece})
				}
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stop = e.Value.StopReason
		case *types.ConverseStreamOutputMemberMetadata:
			usage = e.Value.Usage
		}
	}
	if err := es.Err(); err != nil {
		return model.Response{}, streamError(err)
	}
	msg := results.Message{Role: results.RoleAssistant}
	for _, i := range order {
		b := blocks[i]
		switch {
		case b.isTool:
			// Kept as the model wrote it, like every provider's calls.
			argsJSON := b.input.String()
			if strings.TrimSpace(argsJSON) == "" {
				argsJSON = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, results.ToolCall{ID: b.id, Name: b.name, Arguments: argsJSON})
		case b.text.Len() > 0:
			msg.Parts = append(msg.Parts, results.TextPart(b.text.String()))
		}
	}
	return finish(msg, stop, usage), nil
}

// streamError classifies an exception that arrives inside the event
// stream, after the 200: throttling and service errors retry, a
// validation error does not.
func streamError(err error) error {
	msg := apierr.Redact(err.Error())
	var (
		throttle *types.ThrottlingException
		unavail  *types.ServiceUnavailableException
		internal *types.InternalServerException
		timeout  *types.ModelTimeoutException
		stream   *types.ModelStreamErrorException
		invalid  *types.ValidationException
	)
	switch {
	case errors.As(err, &throttle):
		return &model.Error{Retryable: true, Message: "bedrock: rate limited: " + msg}
	case errors.As(err, &unavail), errors.As(err, &internal), errors.As(err, &timeout), errors.As(err, &stream):
		return &model.Error{Retryable: true, Message: "bedrock: server error: " + msg}
	case errors.As(err, &invalid) && apierr.ContextLength([]byte(msg)):
		return &model.Error{ContextLength: true, Message: "bedrock: the conversation is longer than the model's context window: " + msg}
	case errors.As(err, &invalid):
		return &model.Error{Message: "bedrock: bad request: " + msg}
	}
	return &model.Error{Retryable: true, Message: "bedrock: the stream failed: " + msg}
}

// Params maps a request onto Converse. It is exported for the encoding
// benchmark.
func Params(req model.Request) (*bedrockruntime.ConverseInput, error) {
	if req.Model == "" {
		return nil, fmt.Errorf("no model name")
	}
	in := &bedrockruntime.ConverseInput{ModelId: aws.String(req.Model)}
	system, messages := toMessages(req.System, req.Messages)
	if system != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: system}}
	}
	in.Messages = messages
	if req.Params.MaxTokens > 0 || req.Params.Temperature != nil {
		in.InferenceConfig = &types.InferenceConfiguration{}
		if req.Params.MaxTokens > 0 {
			in.InferenceConfig.MaxTokens = aws.Int32(int32(req.Params.MaxTokens))
		}
		if req.Params.Temperature != nil {
			in.InferenceConfig.Temperature = aws.Float32(float32(*req.Params.Temperature))
		}
	}
	if len(req.Tools) > 0 {
		in.ToolConfig = &types.ToolConfiguration{}
		for _, t := range req.Tools {
			var schema any = map[string]any{"type": "object", "properties": map[string]any{}}
			if len(t.Schema) > 0 && string(t.Schema) != "null" {
				var obj map[string]any
				if err := json.Unmarshal(t.Schema, &obj); err != nil {
					return nil, fmt.Errorf("tool %s: schema is not a JSON object: %w", t.Name, err)
				}
				schema = obj
			}
			spec := types.ToolSpecification{Name: aws.String(t.Name), InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)}}
			if t.Description != "" {
				spec.Description = aws.String(t.Description)
			}
			in.ToolConfig.Tools = append(in.ToolConfig.Tools, &types.ToolMemberToolSpec{Value: spec})
		}
	}
	return in, nil
}

func toMessages(system string, msgs []results.Message) (string, []types.Message) {
	var sys []string
	if system != "" {
		sys = append(sys, system)
	}
	var out []types.Message
	appendUser := func(blocks []types.ContentBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == types.ConversationRoleUser {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, types.Message{Role: types.ConversationRoleUser, Content: blocks})
	}
	for _, m := range msgs {
		switch m.Role {
		case results.RoleSystem:
			if s := m.Text(); s != "" {
				sys = append(sys, s)
			}
		case results.RoleUser:
			appendUser(userBlocks(m.Parts))
		case results.RoleTool:
			appendUser([]types.ContentBlock{toolResult(m)})
		case results.RoleAssistant:
			var blocks []types.ContentBlock
			if text := m.Text(); strings.TrimSpace(text) != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: text})
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
					ToolUseId: aws.String(c.ID), Name: aws.String(c.Name), Input: document.NewLazyDocument(args(c.Arguments)),
				}})
			}
			// The API rejects an empty assistant message.
			if len(blocks) > 0 {
				out = append(out, types.Message{Role: types.ConversationRoleAssistant, Content: blocks})
			}
		}
	}
	return strings.Join(sys, "\n\n"), out
}

// args is the stored arguments as the object the API demands; arguments
// that are not an object become {} (the tool already answered that call
// with an error).
func args(raw string) map[string]any {
	var obj map[string]any
	if json.Unmarshal([]byte(raw), &obj) != nil || obj == nil {
		return map[string]any{}
	}
	return obj
}

func userBlocks(parts []results.Part) []types.ContentBlock {
	var out []types.ContentBlock
	for i, p := range parts {
		switch {
		case p.Type == results.PartText && p.Text != "":
			out = append(out, &types.ContentBlockMemberText{Value: p.Text})
		case p.Type == results.PartJSON:
			out = append(out, &types.ContentBlockMemberText{Value: string(p.JSON)})
		case p.Type == results.PartMedia:
			if f, ok := imageFormats[p.MediaType]; ok {
				out = append(out, &types.ContentBlockMemberImage{Value: types.ImageBlock{Format: f, Source: &types.ImageSourceMemberBytes{Value: p.Data}}})
			} else if f, ok := documentFormats[p.MediaType]; ok {
				out = append(out, &types.ContentBlockMemberDocument{Value: document_(f, i, p.Data)})
			} else {
				out = append(out, &types.ContentBlockMemberText{Value: Refused(p.MediaType)})
			}
		}
	}
	return out
}

func toolResult(m results.Message) types.ContentBlock {
	block := types.ToolResultBlock{ToolUseId: aws.String(m.ToolCallID)}
	if m.IsError {
		block.Status = types.ToolResultStatusError
	}
	for i, p := range m.Parts {
		switch {
		case p.Type == results.PartText && p.Text != "":
			block.Content = append(block.Content, &types.ToolResultContentBlockMemberText{Value: p.Text})
		case p.Type == results.PartJSON:
			block.Content = append(block.Content, &types.ToolResultContentBlockMemberText{Value: string(p.JSON)})
		case p.Type == results.PartMedia:
			if f, ok := imageFormats[p.MediaType]; ok {
				block.Content = append(block.Content, &types.ToolResultContentBlockMemberImage{Value: types.ImageBlock{Format: f, Source: &types.ImageSourceMemberBytes{Value: p.Data}}})
			} else if f, ok := documentFormats[p.MediaType]; ok {
				block.Content = append(block.Content, &types.ToolResultContentBlockMemberDocument{Value: document_(f, i, p.Data)})
			} else {
				block.Content = append(block.Content, &types.ToolResultContentBlockMemberText{Value: Refused(p.MediaType)})
			}
		}
	}
	if len(block.Content) == 0 {
		text := results.SilentSuccessText
		if m.IsError {
			text = `{"error":"the tool failed"}`
		}
		block.Content = []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: text}}
	}
	return &types.ContentBlockMemberToolResult{Value: block}
}

// document_ names a document block: the API requires a name, unique in
// the request, of letters, digits, spaces, hyphens and brackets.
func document_(f types.DocumentFormat, i int, data []byte) types.DocumentBlock {
	return types.DocumentBlock{Format: f, Name: aws.String(fmt.Sprintf("document-%d-%d", i, len(data))), Source: &types.DocumentSourceMemberBytes{Value: data}}
}

var imageFormats = map[string]types.ImageFormat{
	"image/png": types.ImageFormatPng, "image/jpeg": types.ImageFormatJpeg,
	"image/gif": types.ImageFormatGif, "image/webp": types.ImageFormatWebp,
}

var documentFormats = map[string]types.DocumentFormat{
	"application/pdf": types.DocumentFormatPdf, "text/csv": types.DocumentFormatCsv,
	"application/msword": types.DocumentFormatDoc,
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": types.DocumentFormatDocx,
	"application/vnd.ms-excel": types.DocumentFormatXls,
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": types.DocumentFormatXlsx,
	"text/html": types.DocumentFormatHtml, "text/plain": types.DocumentFormatTxt, "text/markdown": types.DocumentFormatMd,
}

// Refused is what the model reads in place of media the API does not take.
func Refused(mediaType string) string {
	return fmt.Sprintf("[%s not shown: Bedrock accepts PNG, JPEG, GIF and WebP images and PDF, CSV, Word, Excel, HTML, text and Markdown documents only]", mediaType)
}

func fromMessage(content []types.ContentBlock, stop types.StopReason, u *types.TokenUsage) model.Response {
	msg := results.Message{Role: results.RoleAssistant}
	for _, b := range content {
		switch v := b.(type) {
		case *types.ContentBlockMemberText:
			if v.Value != "" {
				msg.Parts = append(msg.Parts, results.TextPart(v.Value))
			}
		case *types.ContentBlockMemberToolUse:
			argsJSON := "{}"
			if v.Value.Input != nil {
				var in any
				if v.Value.Input.UnmarshalSmithyDocument(&in) == nil && in != nil {
					if b, err := json.Marshal(in); err == nil {
						argsJSON = string(b)
					}
				}
			}
			msg.ToolCalls = append(msg.ToolCalls, results.ToolCall{ID: aws.ToString(v.Value.ToolUseId), Name: aws.ToString(v.Value.Name), Arguments: argsJSON})
		}
	}
	return finish(msg, stop, u)
}

func finish(msg results.Message, stop types.StopReason, u *types.TokenUsage) model.Response {
	resp := model.Response{Message: msg}
	switch {
	case stop == types.StopReasonMaxTokens || stop == types.StopReasonModelContextWindowExceeded:
		resp.StopReason = model.StopMaxTokens
	case len(msg.ToolCalls) > 0:
		resp.StopReason = model.StopToolCalls
	case stop == types.StopReasonEndTurn || stop == types.StopReasonStopSequence || stop == "":
		resp.StopReason = model.StopEnd
	default:
		resp.StopReason = model.StopOther
	}
	if u != nil {
		cached := int(aws.ToInt32(u.CacheReadInputTokens))
		resp.Usage = model.Usage{
			// Bedrock counts cache reads and writes apart from
			// inputTokens; they were still read.
			InputTokens:  int(aws.ToInt32(u.InputTokens)) + cached + int(aws.ToInt32(u.CacheWriteInputTokens)),
			OutputTokens: int(aws.ToInt32(u.OutputTokens)),
			CachedTokens: cached,
		}
	}
	return resp
}

func asAny[T error](err error, target *T) bool { return errors.As(err, target) }
