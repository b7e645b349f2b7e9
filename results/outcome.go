package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// formatVersion is written into every encoded Outcome and Card. Decoders
// accept this version and older ones they know how to read.
const formatVersion = 1

// Kind discriminates the closed set of tool outcomes.
type Kind string

const (
	KindSuccess            Kind = "success"
	KindToolError          Kind = "tool_error"
	KindInternalError      Kind = "internal_error"
	KindInterrupt          Kind = "interrupt"
	KindConnectionRequired Kind = "connection_required"
	KindTransfer           Kind = "transfer"
)

// kinds lists every outcome kind in a stable order.
var kinds = []Kind{KindSuccess, KindToolError, KindInternalError, KindInterrupt, KindConnectionRequired, KindTransfer}

// Outcome is what one run of a tool produced. Exactly one of the body
// pointers is set, the one that matches Kind; use the constructors rather
// than building it by hand.
type Outcome struct {
	Kind       Kind                `json:"kind"`
	Success    *Success            `json:"success,omitempty"`
	ToolError  *ToolError          `json:"tool_error,omitempty"`
	Internal   *InternalError      `json:"internal_error,omitempty"`
	Interrupt  *Interrupt          `json:"interrupt,omitempty"`
	Connection *ConnectionRequired `json:"connection_required,omitempty"`
	Transfer   *Transfer           `json:"transfer,omitempty"`
}

// PartType discriminates the parts of a success or of a message.
type PartType string

const (
	PartText  PartType = "text"
	PartMedia PartType = "media"
	PartJSON  PartType = "json"
)

// Part is one ordered piece of tool output or message content.
type Part struct {
	Type PartType `json:"type"`
	Text string   `json:"text,omitempty"`
	// MediaType is the IANA content type of Data, for example image/png.
	MediaType string          `json:"media_type,omitempty"`
	Data      []byte          `json:"data,omitempty"`
	JSON      json.RawMessage `json:"json,omitempty"`
}

// TextPart, MediaPart and JSONPart build parts.
func TextPart(s string) Part { return Part{Type: PartText, Text: s} }

func MediaPart(mediaType string, data []byte) Part {
	return Part{Type: PartMedia, MediaType: mediaType, Data: data}
}

func JSONPart(v json.RawMessage) Part { return Part{Type: PartJSON, JSON: v} }

// Source is something the output was drawn from that the model may cite
// and a card may link: an absolute http or https URL (see Validate).
type Source struct {
	URL   string `json:"url"`
	Title string `json:"title,omitempty"`
}

// Validate reports whether s is a source a person may follow from a card:
// an absolute http(s) URL with a host, with no spaces or control
// characters. Tools relay URLs that servers and pages chose, and a
// javascript: or data: URL shown as a link runs in whoever clicks it, so
// this is checked here, once, for every tool; a tool with a link of
// another kind says it in its text.
func (s Source) Validate() error {
	if s.URL == "" {
		return errors.New("has no url")
	}
	if strings.ContainsFunc(s.URL, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return errors.New("has a url with spaces or control characters; sources are http(s) URLs")
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return fmt.Errorf("has a url that does not parse as an http(s) URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return errors.New("has a url that is not an absolute http(s) URL")
	}
	return nil
}

// dropUnsafeSources removes the sources with a URL Validate refuses, so
// that an outcome or card stored before sources were checked still
// decodes (a turn's history must replay) without them. A source without a
// URL was never valid and is still an error.
func (s *Success) dropUnsafeSources() {
	if s == nil {
		return
	}
	kept := s.Sources[:0:0]
	for _, src := range s.Sources {
		if src.URL == "" || src.Validate() == nil {
			kept = append(kept, src)
		}
	}
	if len(kept) < len(s.Sources) {
		s.Sources = kept
	}
}

// FileDiff is a change a tool made to one file, as a unified diff.
type FileDiff struct {
	Path string `json:"path"`
	Diff string `json:"diff"`
}

// Success is a tool that ran and succeeded. Zero parts is legal: the tool
// succeeded silently.
type Success struct {
	Parts   []Part     `json:"parts,omitempty"`
	Sources []Source   `json:"sources,omitempty"`
	Diffs   []FileDiff `json:"diffs,omitempty"`
	// WorkDir, when set, is the working directory later calls of the turn
	// run in (a shell tool that ran cd).
	WorkDir string `json:"workdir,omitempty"`
	// Details is for logs and UIs; it is never rendered for the model.
	Details json.RawMessage `json:"details,omitempty"`
	// Raw is the untruncated output, kept for people when the parts were
	// truncated for the model.
	Raw       string `json:"raw,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// RawRef stands for a Raw too large to carry in history and on cards:
	// it names the whole output in the worker's output store (starter raw
	// reads it back).
	RawRef string `json:"raw_ref,omitempty"`
}

// ToolError is an expected failure the model should know about.
type ToolError struct {
	Message string `json:"message"`
}

// InternalError is a system failure. Detail is for operators only; the
// model sees a generic sentence and Ref.
type InternalError struct {
	Ref    string `json:"ref"`
	Detail string `json:"detail,omitempty"`
}

// InterruptType says what kind of answer a person must give.
type InterruptType string

const (
	InterruptApproval InterruptType = "approval"
	InterruptChoice   InterruptType = "choice"
	InterruptQuestion InterruptType = "question"
)

// Option is one choice of a choice interrupt.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label,omitempty"`
}

// Interrupt is a tool that needs a person before it can finish. The tool
// runs again with the answer.
type Interrupt struct {
	Type   InterruptType `json:"type"`
	Prompt string        `json:"prompt"`
	// Plan is what an approval approves.
	Plan    string   `json:"plan,omitempty"`
	Options []Option `json:"options,omitempty"`
	// Schema optionally constrains a question's answer (JSON Schema).
	Schema json.RawMessage `json:"schema,omitempty"`
}

// ConnectionRequired is a tool that needs an account connection first.
type ConnectionRequired struct {
	Provider string   `json:"provider"`
	Scopes   []string `json:"scopes,omitempty"`
	// Hint tells a UI how to connect (a URL, a settings page, a command).
	Hint string `json:"hint,omitempty"`
}

// Transfer hands the conversation to another agent.
type Transfer struct {
	Target  string `json:"target"`
	Message string `json:"message,omitempty"`
	// Now, in a session, has the target answer the message that asked
	// for the transfer; without it the target takes over from the next
	// message on.
	Now bool `json:"now,omitempty"`
}

// Succeed returns a success with the given parts.
func Succeed(parts ...Part) Outcome {
	return Outcome{Kind: KindSuccess, Success: &Success{Parts: parts}}
}

// SucceedText returns a success with one text part, or a silent success
// when text is empty.
func SucceedText(text string) Outcome {
	if text == "" {
		return Succeed()
	}
	return Succeed(TextPart(text))
}

// FailTool returns a tool error the model will see.
func FailTool(format string, args ...any) Outcome {
	return Outcome{Kind: KindToolError, ToolError: &ToolError{Message: fmt.Sprintf(format, args...)}}
}

// FailInternal returns an internal error whose detail the model never sees.
func FailInternal(ref, detail string) Outcome {
	return Outcome{Kind: KindInternalError, Internal: &InternalError{Ref: ref, Detail: detail}}
}

// NeedApproval, NeedChoice and NeedAnswer interrupt for a person.
func NeedApproval(prompt, plan string) Outcome {
	return Outcome{Kind: KindInterrupt, Interrupt: &Interrupt{Type: InterruptApproval, Prompt: prompt, Plan: plan}}
}

func NeedChoice(prompt string, options ...Option) Outcome {
	return Outcome{Kind: KindInterrupt, Interrupt: &Interrupt{Type: InterruptChoice, Prompt: prompt, Options: options}}
}

func NeedAnswer(prompt string, schema json.RawMessage) Outcome {
	return Outcome{Kind: KindInterrupt, Interrupt: &Interrupt{Type: InterruptQuestion, Prompt: prompt, Schema: schema}}
}

// NeedConnection asks for an account connection to provider.
func NeedConnection(provider, hint string, scopes ...string) Outcome {
	return Outcome{Kind: KindConnectionRequired, Connection: &ConnectionRequired{Provider: provider, Hint: hint, Scopes: scopes}}
}

// TransferTo hands the conversation to target.
func TransferTo(target, message string) Outcome {
	return Outcome{Kind: KindTransfer, Transfer: &Transfer{Target: target, Message: message}}
}

// WithSources attaches sources to a success; other kinds are returned
// unchanged.
func (o Outcome) WithSources(sources ...Source) Outcome {
	if o.Kind != KindSuccess || o.Success == nil {
		return o
	}
	s := *o.Success
	s.Sources = append(append([]Source(nil), s.Sources...), sources...)
	o.Success = &s
	return o
}

// WithWorkDir sets the new working directory of a success; other kinds are
// returned unchanged.
func (o Outcome) WithWorkDir(dir string) Outcome {
	if o.Kind != KindSuccess || o.Success == nil {
		return o
	}
	s := *o.Success
	s.WorkDir = dir
	o.Success = &s
	return o
}

// WithDiffs attaches file diffs to a success; other kinds are returned
// unchanged.
func (o Outcome) WithDiffs(diffs ...FileDiff) Outcome {
	if o.Kind != KindSuccess || o.Success == nil {
		return o
	}
	s := *o.Success
	s.Diffs = append(append([]FileDiff(nil), s.Diffs...), diffs...)
	o.Success = &s
	return o
}

// WithDetails attaches log/UI-only details to a success; other kinds are
// returned unchanged.
func (o Outcome) WithDetails(details json.RawMessage) Outcome {
	if o.Kind != KindSuccess || o.Success == nil {
		return o
	}
	s := *o.Success
	s.Details = details
	o.Success = &s
	return o
}

// Validate reports whether o is one well-formed member of the closed set.
func (o Outcome) Validate() error {
	set := 0
	for _, p := range []bool{o.Success != nil, o.ToolError != nil, o.Internal != nil, o.Interrupt != nil, o.Connection != nil, o.Transfer != nil} {
		if p {
			set++
		}
	}
	if set > 1 {
		return fmt.Errorf("outcome of kind %q carries more than one body", o.Kind)
	}
	missing := func() error { return fmt.Errorf("outcome of kind %q has no %s body", o.Kind, o.Kind) }
	switch o.Kind {
	case KindSuccess:
		if o.Success == nil {
			return missing()
		}
		return o.Success.validate()
	case KindToolError:
		if o.ToolError == nil {
			return missing()
		}
		if o.ToolError.Message == "" {
			return fmt.Errorf("tool_error has an empty message")
		}
	case KindInternalError:
		if o.Internal == nil {
			return missing()
		}
		if o.Internal.Ref == "" {
			return fmt.Errorf("internal_error has no reference id")
		}
	case KindInterrupt:
		if o.Interrupt == nil {
			return missing()
		}
		return o.Interrupt.Validate()
	case KindConnectionRequired:
		if o.Connection == nil {
			return missing()
		}
		if o.Connection.Provider == "" {
			return fmt.Errorf("connection_required names no provider")
		}
	case KindTransfer:
		if o.Transfer == nil {
			return missing()
		}
		if o.Transfer.Target == "" {
			return fmt.Errorf("transfer names no target")
		}
	case "":
		return fmt.Errorf("outcome has no kind")
	default:
		return fmt.Errorf("unknown outcome kind %q", o.Kind)
	}
	return nil
}

// validate is shared by Outcome and Card so that a card's output is held to
// the same rules as the outcome it came from.
func (s *Success) validate() error {
	for i, p := range s.Parts {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("success part %d: %w", i, err)
		}
	}
	for i, src := range s.Sources {
		if err := src.Validate(); err != nil {
			return fmt.Errorf("success source %d %w", i, err)
		}
	}
	for i, d := range s.Diffs {
		if d.Path == "" {
			return fmt.Errorf("success diff %d has no path", i)
		}
	}
	// Checked here rather than left to encoding/json so that the error
	// names the field instead of json.RawMessage.
	if len(s.Details) > 0 && !json.Valid(s.Details) {
		return fmt.Errorf("success details are not valid JSON")
	}
	return nil
}

// Validate reports whether p is a well-formed part of its type.
func (p Part) Validate() error {
	switch p.Type {
	case PartText:
		return nil
	case PartMedia:
		if p.MediaType == "" {
			return fmt.Errorf("media part has no media_type")
		}
		return nil
	case PartJSON:
		if !json.Valid(p.JSON) {
			return fmt.Errorf("json part does not hold valid JSON")
		}
		return nil
	case "":
		return fmt.Errorf("part has no type")
	default:
		return fmt.Errorf("unknown part type %q", p.Type)
	}
}

// Validate reports whether i is a well-formed interrupt.
func (i Interrupt) Validate() error {
	switch i.Type {
	case InterruptApproval, InterruptQuestion:
	case InterruptChoice:
		if len(i.Options) == 0 {
			return fmt.Errorf("choice interrupt has no options")
		}
		seen := map[string]bool{}
		for _, o := range i.Options {
			if o.ID == "" {
				return fmt.Errorf("choice interrupt has an option without an id")
			}
			if seen[o.ID] {
				return fmt.Errorf("choice interrupt repeats option %q", o.ID)
			}
			seen[o.ID] = true
		}
	case "":
		return fmt.Errorf("interrupt has no type")
	default:
		return fmt.Errorf("unknown interrupt type %q", i.Type)
	}
	if len(i.Schema) > 0 && !json.Valid(i.Schema) {
		return fmt.Errorf("interrupt schema is not valid JSON")
	}
	return nil
}
