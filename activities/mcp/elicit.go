package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// Bounds on what a server may ask a person. The message and schema come
// from the server and are shown to people, so they are untrusted.
const (
	maxMessageBytes    = 4 << 10
	maxElicitSchema    = 16 << 10
	maxChoiceOptions   = 64
	maxOptionBytes     = 256
	maxElicitations    = 8
	elicitationActions = "accept, decline"
)

// Kinds of questions, by how the answer becomes the server's content.
const (
	// kindConfirm: the server asks for nothing but a yes or no (no
	// fields); a choice of accept or decline, passed on as the action.
	kindConfirm = "confirm"
	// kindEnum: one string field with fixed values; a choice of them.
	kindEnum = "enum"
	// kindBool: one boolean field; a choice of true or false.
	kindBool = "bool"
	// kindValue: one field of another type; a question whose schema is
	// the field's, the answer being the field's value.
	kindValue = "value"
	// kindObject: several fields; a question whose schema is the
	// server's, the answer being the whole object.
	kindObject = "object"
	// kindURL: the server asks the person to open a page of its own (URL
	// mode: a sign-in, a payment); a choice of done or decline.
	kindURL = "url"
)

// maxElicitURL bounds the URL of a URL-mode elicitation.
const maxElicitURL = 2 << 10

// question is one elicitation as Tollgate puts it to a person, with what
// it takes to turn the answer into the server's result.
type question struct {
	// ID fingerprints what the server asked (message and schema): a
	// re-issued call is answered only for questions it asks again word
	// for word.
	ID       string          `json:"id"`
	Kind     string          `json:"kind"`
	URL      string          `json:"url,omitempty"`
	Property string          `json:"property,omitempty"`
	Schema   json.RawMessage `json:"schema,omitempty"`
	// Interrupt is what the card shows.
	Interrupt results.Interrupt `json:"interrupt"`
}

// describe turns a form elicitation into a question. The SDK has already
// checked that the schema is a flat object of primitive fields.
func describe(server string, p *mcpsdk.ElicitParams) (*question, error) {
	if p.Mode == "url" || (p.Mode == "" && (p.URL != "" || p.ElicitationID != "")) {
		return describeURL(server, p)
	}
	if p.Mode != "" && p.Mode != "form" {
		return nil, fmt.Errorf("the server asked in elicitation mode %q, which Tollgate does not know", clean(p.Mode, 32))
	}
	var raw json.RawMessage
	if p.RequestedSchema != nil {
		b, err := json.Marshal(p.RequestedSchema)
		if err != nil {
			return nil, fmt.Errorf("the requested schema does not encode: %w", err)
		}
		raw = b
	}
	if len(raw) > maxElicitSchema {
		return nil, fmt.Errorf("the requested schema is %d bytes; at most %d are relayed", len(raw), maxElicitSchema)
	}
	mode := p.Mode
	if mode == "" {
		mode = "form"
	}
	sum := sha256.Sum256([]byte(mode + "\x00" + p.Message + "\x00" + string(raw)))
	q := &question{ID: hex.EncodeToString(sum[:16]), Schema: raw}

	prompt := fmt.Sprintf("The MCP server %s asks: %s", server, clean(p.Message, maxMessageBytes))
	var schema jsonschema.Schema
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &schema); err != nil {
			return nil, fmt.Errorf("the requested schema does not decode: %w", err)
		}
		if _, err := tool.CompileSchema(raw); err != nil {
			return nil, fmt.Errorf("the requested schema does not compile: %w", err)
		}
	}
	switch len(schema.Properties) {
	case 0:
		q.Kind = kindConfirm
		q.Interrupt = results.Interrupt{Type: results.InterruptChoice, Prompt: prompt, Options: []results.Option{
			{ID: "accept", Label: "Accept"}, {ID: "decline", Label: "Decline"},
		}}
		return q, nil
	case 1:
		for name, field := range schema.Properties {
			q.Property = name
			return q, q.describeField(prompt, name, field)
		}
	}
	q.Kind = kindObject
	hint := "\nAnswer with a JSON object that fits the schema."
	shown := raw
	if withDefaults := defaultedFields(&schema); len(withDefaults) > 0 {
		// A field the server gives a default for may be left out (the
		// default is filled in), so the person is not made to repeat it.
		hint += " Fields left out take the server's defaults: " + strings.Join(withDefaults, ", ") + "."
		schema.Required = slices.DeleteFunc(slices.Clone(schema.Required), func(name string) bool { return slices.Contains(withDefaults, name) })
		b, err := json.Marshal(&schema)
		if err != nil {
			return nil, fmt.Errorf("the requested schema does not encode: %w", err)
		}
		shown = b
	}
	q.Interrupt = results.Interrupt{Type: results.InterruptQuestion, Prompt: prompt + hint, Schema: shown}
	return q, nil
}

// describeURL turns a URL-mode elicitation into a choice whose prompt
// carries the page: the person opens it, does what the server needs
// there, and says done (or declines). Only an http(s) URL is relayed: a
// card's link must not be a javascript: or file: one.
func describeURL(server string, p *mcpsdk.ElicitParams) (*question, error) {
	if p.RequestedSchema != nil {
		return nil, errors.New("a URL elicitation carries a requested schema")
	}
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || len(p.URL) > maxElicitURL || !safeText(p.URL) {
		return nil, fmt.Errorf("the page the server asked the user to open is not an http(s) URL of at most %d bytes without credentials", maxElicitURL)
	}
	sum := sha256.Sum256([]byte("url\x00" + p.Message + "\x00" + p.URL))
	q := &question{ID: hex.EncodeToString(sum[:16]), Kind: kindURL, URL: p.URL}
	prompt := fmt.Sprintf("The MCP server %s asks you to open a page: %s\n%s\nChoose \"Done\" when you have finished there.", server, p.URL, clean(p.Message, maxMessageBytes))
	q.Interrupt = results.Interrupt{Type: results.InterruptChoice, Prompt: prompt, Options: []results.Option{
		{ID: "done", Label: "Done"}, {ID: "decline", Label: "Decline"},
	}}
	return q, nil
}

// defaultedFields names the fields of a form that carry a default, in
// order.
func defaultedFields(s *jsonschema.Schema) []string {
	var names []string
	for name, f := range s.Properties {
		if f != nil && len(f.Default) > 0 && string(f.Default) != "null" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// applyDefaults fills the fields an accepted form left out with the
// defaults the server's schema gives (the spec's rule for elicitation
// defaults): the server receives a complete answer.
func applyDefaults(raw json.RawMessage, content map[string]any) error {
	if len(raw) == 0 || content == nil {
		return nil
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(raw, &schema); err != nil {
		return fmt.Errorf("the requested schema does not decode: %w", err)
	}
	for _, name := range defaultedFields(&schema) {
		if _, ok := content[name]; ok {
			continue
		}
		var v any
		if err := json.Unmarshal(schema.Properties[name].Default, &v); err != nil {
			return fmt.Errorf("the default of field %q does not decode: %w", name, err)
		}
		content[name] = v
	}
	return nil
}

// describeField makes the question for a form of one field.
func (q *question) describeField(prompt, name string, f *jsonschema.Schema) error {
	if f == nil {
		f = &jsonschema.Schema{}
	}
	label := clean(f.Title, maxOptionBytes)
	if label == "" {
		label = clean(name, maxOptionBytes)
	}
	if d := clean(f.Description, maxMessageBytes); d != "" {
		label += " (" + d + ")"
	}
	prompt += "\n" + label
	switch {
	case len(f.Enum) > 0 || len(f.OneOf) > 0:
		opts, err := enumOptions(f)
		if err != nil {
			return err
		}
		q.Kind = kindEnum
		q.Interrupt = results.Interrupt{Type: results.InterruptChoice, Prompt: prompt, Options: opts}
	case f.Type == "boolean":
		q.Kind = kindBool
		q.Interrupt = results.Interrupt{Type: results.InterruptChoice, Prompt: prompt, Options: []results.Option{
			{ID: "true", Label: "Yes"}, {ID: "false", Label: "No"},
		}}
	default:
		fs, err := json.Marshal(f)
		if err != nil {
			return fmt.Errorf("the field's schema does not encode: %w", err)
		}
		q.Kind = kindValue
		q.Interrupt = results.Interrupt{Type: results.InterruptQuestion, Prompt: prompt, Schema: fs}
	}
	return nil
}

// enumOptions lists a string field's values: "enum" (labelled by the
// legacy "enumNames") or "oneOf" entries of "const" and "title".
func enumOptions(f *jsonschema.Schema) ([]results.Option, error) {
	var opts []results.Option
	add := func(v any, label string) error {
		id, ok := v.(string)
		if !ok {
			return fmt.Errorf("an option of the field is %T, not a string", v)
		}
		if id == "" || len(id) > maxOptionBytes || !utf8.ValidString(id) {
			return fmt.Errorf("an option of the field is empty, longer than %d bytes or not UTF-8", maxOptionBytes)
		}
		if slices.ContainsFunc(opts, func(o results.Option) bool { return o.ID == id }) {
			return fmt.Errorf("the field lists option %q twice", id)
		}
		opts = append(opts, results.Option{ID: id, Label: clean(label, maxOptionBytes)})
		return nil
	}
	if len(f.Enum) > 0 {
		names, _ := f.Extra["enumNames"].([]any)
		for i, v := range f.Enum {
			label, _ := v.(string)
			if len(names) == len(f.Enum) {
				if n, ok := names[i].(string); ok {
					label = n
				}
			}
			if err := add(v, label); err != nil {
				return nil, err
			}
		}
	} else {
		for _, e := range f.OneOf {
			if e == nil || e.Const == nil {
				return nil, errors.New("a oneOf entry of the field has no const")
			}
			if err := add(*e.Const, e.Title); err != nil {
				return nil, err
			}
		}
	}
	if len(opts) > maxChoiceOptions {
		return nil, fmt.Errorf("the field has %d options; at most %d are relayed", len(opts), maxChoiceOptions)
	}
	return opts, nil
}

// answer turns a person's answer (validated by the workflow against the
// interrupt) into the result the server gets, and checks it against what
// the server asked, so a mismatch is Tollgate's sentence rather than the
// server's failure.
func (q *question) answer(raw json.RawMessage) (storedAnswer, error) {
	a := storedAnswer{Question: q.ID, Action: "accept"}
	switch q.Kind {
	case kindConfirm:
		var id string
		if err := json.Unmarshal(raw, &id); err != nil || (id != "accept" && id != "decline") {
			return a, fmt.Errorf("the answer must be one of %s", elicitationActions)
		}
		a.Action = id
		return a, nil
	case kindURL:
		var id string
		if err := json.Unmarshal(raw, &id); err != nil || (id != "done" && id != "decline") {
			return a, errors.New(`the answer must be "done" or "decline"`)
		}
		if id == "decline" {
			a.Action = "decline"
		}
		return a, nil
	case kindEnum:
		var id string
		if err := json.Unmarshal(raw, &id); err != nil {
			return a, errors.New("the answer must be one option id as a JSON string")
		}
		a.Content = map[string]any{q.Property: id}
	case kindBool:
		var id string
		if err := json.Unmarshal(raw, &id); err != nil || (id != "true" && id != "false") {
			return a, errors.New(`the answer must be "true" or "false"`)
		}
		a.Content = map[string]any{q.Property: id == "true"}
	case kindValue:
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return a, fmt.Errorf("the answer is not JSON: %w", err)
		}
		a.Content = map[string]any{q.Property: v}
	case kindObject:
		if err := json.Unmarshal(raw, &a.Content); err != nil || a.Content == nil {
			return a, errors.New("the answer must be a JSON object that fits the schema")
		}
		if err := applyDefaults(q.Schema, a.Content); err != nil {
			return a, err
		}
	default:
		return a, fmt.Errorf("unknown question kind %q", q.Kind)
	}
	if len(q.Schema) > 0 {
		schema, err := tool.CompileSchema(q.Schema)
		if err != nil {
			return a, fmt.Errorf("the server's schema does not compile: %w", err)
		}
		content, _ := json.Marshal(a.Content)
		if err := schema.Validate(content); err != nil {
			return a, fmt.Errorf("the answer does not fit what the server asked: %w", err)
		}
	}
	return a, nil
}

func (a storedAnswer) result() *mcpsdk.ElicitResult {
	return &mcpsdk.ElicitResult{Action: a.Action, Content: a.Content}
}

// errParked is what the server hears for a question Tollgate has taken to
// a person: the call it belongs to is being cancelled, and will be issued
// again when the answer is in.
var errParked = errors.New("Tollgate has asked the user; this call is cancelled and will be issued again with the answer")

// elicitor answers a server's questions during one run of a call: from
// the answers people gave in earlier runs, in the order the server asks
// each question; the first question it has no answer for is parked and
// the call cancelled.
type elicitor struct {
	server string
	cancel context.CancelFunc

	mu      sync.Mutex
	answers map[string][]storedAnswer
	used    map[string]int
	// resumed is the answer this run was started with; resumedUsed says
	// whether the server asked its question again and got it.
	resumed     *storedAnswer
	resumedUsed bool
	pending     *question
	refused     error

	// asked carries a question the call holds on (see held); the run
	// parks it. answer brings the person's answer to it, released ends
	// the wait.
	asked       chan *question
	answer      chan storedAnswer
	released    chan struct{}
	releaseOnce sync.Once
}

func newElicitor(server string, answers []storedAnswer, resumed *storedAnswer, cancel context.CancelFunc) *elicitor {
	e := &elicitor{server: server, cancel: cancel, answers: map[string][]storedAnswer{}, used: map[string]int{}, resumed: resumed,
		asked: make(chan *question, 1), answer: make(chan storedAnswer, 1), released: make(chan struct{})}
	for _, a := range answers {
		e.answers[a.Question] = append(e.answers[a.Question], a)
	}
	if resumed != nil {
		e.answers[resumed.Question] = append(e.answers[resumed.Question], *resumed)
	}
	return e
}

func (e *elicitor) handle(ctx context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
	q, err := describe(e.server, req.Params)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		if e.refused == nil {
			e.refused = err
		}
		e.cancel()
		return nil, fmt.Errorf("Tollgate cannot relay this request: %w", err)
	}
	i := e.used[q.ID]
	e.used[q.ID]++
	if have := e.answers[q.ID]; i < len(have) {
		if e.resumed != nil && q.ID == e.resumed.Question && i == len(have)-1 {
			e.resumedUsed = true
		}
		return have[i].result(), nil
	}
	if e.pending != nil {
		// Another question already waits for the person; a server asking
		// two at once gets this one again on the re-issue.
		return nil, errParked
	}
	// The run parks this question; the request waits for the answer
	// while the call is held on this worker.
	e.pending = q
	e.asked <- q
	e.mu.Unlock()
	var a storedAnswer
	var ok bool
	select {
	case a, ok = <-e.answer:
	case <-e.released:
	case <-ctx.Done():
	}
	e.mu.Lock()
	if !ok {
		e.cancel()
		return nil, errParked
	}
	e.pending = nil
	if e.resumed != nil && e.resumed.Question == a.Question {
		e.resumedUsed = true
	}
	e.answers[q.ID] = append(e.answers[q.ID], a)
	e.used[q.ID] = len(e.answers[q.ID])
	return a.result(), nil
}

// deliver hands the person's answer to the question the held call waits
// on.
func (e *elicitor) deliver(a storedAnswer) {
	e.mu.Lock()
	e.resumed = &a
	e.resumedUsed = false
	e.mu.Unlock()
	e.answer <- a
}

// release ends a held call's wait: its question is answered with an
// error.
func (e *elicitor) release() {
	e.releaseOnce.Do(func() { close(e.released) })
}

// outcome reports, once the call is over, the question to put to a
// person (if any), why a question could not be relayed (if one could
// not), and whether the answer the run started with was given.
func (e *elicitor) outcome() (parked *question, refused error, resumedUsed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pending, e.refused, e.resumedUsed
}

// clean makes server text fit to show a person: valid UTF-8, no control
// characters but line breaks and tabs, at most max bytes.
func clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b bytes.Buffer
	for _, r := range s {
		// Bidirectional overrides can make a prompt read differently
		// from what it says.
		if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r < 0xa0 || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			continue
		}
		b.WriteRune(r)
	}
	out, _ := results.Truncate(strings.TrimSpace(b.String()), results.Limits{MaxBytes: max})
	return out
}
