// Package scripted is a model.Provider that plays a JSON script of replies.
// It is Tollgate's offline default, its demo and its test double: no
// network, no clock, no randomness, so the same conversation always gets
// the same reply, and a replayed or retried activity sees what the first
// attempt saw.
//
// # Script format
//
//	{
//	  "replies": [
//	    {
//	      "text": "I'll read the notes first.",
//	      "tool_calls": [
//	        {"id": "call_1", "name": "read_file", "arguments": {"path": "notes.txt"}},
//	        {"name": "list_dir", "arguments_raw": "{\"path\": "}
//	      ],
//	      "expect": {"last_role": "user", "contains": "notes", "tool_results": 0}
//	    },
//	    {"text": "Done.", "expect": {"last_role": "tool", "tool_results": 2}}
//	  ]
//	}
//
// Which reply plays: the number of assistant messages already in the
// request. Reply i answers the conversation after i assistant turns, so
// the provider keeps no state between calls.
//
// A reply has optional "text" and optional "tool_calls", and "repeat": N
// plays it N times in a row (a long turn in a few lines). A tool call has
// a "name", an optional "id" (default "call_<turn>_<call>", both counted
// from 1, the turn being the assistant turn that plays it; ids must be
// unique in the script, and a repeated reply's calls take the default)
// and its arguments either as
// "arguments", a JSON object sent as compact JSON text (default {}), or as
// "arguments_raw", a string sent exactly as written, to play a model that
// writes malformed JSON.
//
// "pace_ms" (top level, optional) is the pause, in milliseconds, before
// each piece of a reply when someone watches the turn: with a stream
// function on the context (model.WithStream) the text is sent a word at a
// time and tool arguments a few bytes at a time, so a demo visibly streams.
// Nobody watching, or no pace, means no pause; the reply is the same.
//
// "context_tokens" (top level, optional) is the model's context window,
// DefaultContextTokens when absent. The model counts a request's tokens
// as compact.Estimate does (about four bytes a token, with a few for each
// message's framing and its tool calls), plus the system prompt and the
// tool definitions, and refuses one past its window as a real provider
// does (a *model.Error with ContextLength set). A turn compacts before
// that: it takes a scripted model's window to be DefaultContextTokens,
// or policy.context_tokens.
//
// "expect" checks what the reply is answering; every field is optional:
//   - "last_role": the role of the last message sent (user, tool, ...).
//   - "contains": a substring of the text of the messages since the last
//     assistant message (the prompt, or the tool results and any user
//     message after them).
//   - "tool_results": how many tool messages came since the last assistant
//     message.
//
// A failed check, or a conversation longer than the script, is a
// non-retryable *model.Error: a script that does not fit the conversation
// will not fit it on the next attempt either.
//
// # Naming a script
//
// "scripted:demo" is the built-in demo (see Builtins); "scripted:<path>"
// loads a file, but only from the scripts directory the operator
// configured: the model string comes from whoever starts a turn, and
// without this rule it would read any file the worker can. Open resolves
// both.
package scripted

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/compact"
	"github.com/tollgate-dev/tollgate/results"
)

// Script is a parsed, validated script.
type Script struct {
	// Name is how errors refer to the script: "demo" or the file path.
	Name    string  `json:"-"`
	Replies []Reply `json:"replies"`
	// PaceMS is the pause before each streamed piece.
	PaceMS int `json:"pace_ms,omitempty"`
	// ContextTokens is the model's context window; zero is
	// DefaultContextTokens.
	ContextTokens int `json:"context_tokens,omitempty"`
}

// DefaultContextTokens is a scripted model's context window when its
// script names none: a common real model's, so that a long scripted turn
// compacts as one with a real model does, instead of carrying a
// conversation no model would accept, while a demo or test turn with a
// large tool output fits as it would with that model.
const DefaultContextTokens = 128_000

// maxContextTokens bounds a script's window, at the largest real ones.
const maxContextTokens = 10_000_000

// Window is the script's context window in tokens.
func (s *Script) Window() int {
	if s.ContextTokens > 0 {
		return s.ContextTokens
	}
	return DefaultContextTokens
}

// Reply is one assistant turn, or Repeat turns alike.
type Reply struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Expect    *Expect    `json:"expect,omitempty"`
	// Repeat plays the reply this many times in a row (0 and 1: once),
	// each time with fresh default call ids.
	Repeat int `json:"repeat,omitempty"`
	// first is the assistant turn, counted from 1, the reply first plays.
	first int
}

// maxRepeat bounds a reply's repeat: a script of a very long turn, not
// of an endless one.
const maxRepeat = 1_000_000

// ToolCall is one call a reply makes.
type ToolCall struct {
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name"`
	Arguments    json.RawMessage `json:"arguments,omitempty"`
	ArgumentsRaw *string         `json:"arguments_raw,omitempty"`
}

// Expect checks what a reply is answering.
type Expect struct {
	LastRole    results.Role `json:"last_role,omitempty"`
	Contains    string       `json:"contains,omitempty"`
	ToolResults *int         `json:"tool_results,omitempty"`
}

//go:embed scripts/*.json
var builtins embed.FS

// Builtins lists the names of the built-in scripts.
func Builtins() []string {
	entries, _ := builtins.ReadDir("scripts")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(names)
	return names
}

// Builtin returns a built-in script by name.
func Builtin(name string) (*Script, error) {
	data, err := builtins.ReadFile(path.Join("scripts", name+".json"))
	if err != nil {
		return nil, fmt.Errorf("no built-in script %q (built-in: %s)", name, strings.Join(Builtins(), ", "))
	}
	return Parse(name, data)
}

// ErrNotAllowed is wrapped by Open's errors for a script file the
// confinement rule refuses.
var ErrNotAllowed = errors.New("script file not allowed")

// Open resolves what follows "scripted:": a built-in name, or a file
// beneath dir, the operator's scripts directory. A name without a slash or
// a ".json" suffix is a built-in. A relative path is taken from dir; an
// absolute one must name a file beneath dir. With dir empty only the
// built-ins may be named. The file is opened through an os.Root on dir,
// so neither ".." nor a symbolic link leads out of it.
func Open(ref, dir string) (*Script, error) {
	if builtin(ref) {
		return Builtin(ref)
	}
	s, _, err := openFile(ref, dir, nil)
	return s, err
}

// builtin says whether ref names a built-in script: no slash and no
// ".json" suffix.
func builtin(ref string) bool {
	return !strings.ContainsAny(ref, `/\`) && !strings.HasSuffix(ref, ".json")
}

// openFile reads and parses the script file ref names beneath dir, and
// returns it with the file's FileInfo. With known, the FileInfo of the
// same file read before, it returns a nil script if the file is still
// that one, unread.
func openFile(ref, dir string, known fs.FileInfo) (*Script, fs.FileInfo, error) {
	if dir == "" {
		return nil, nil, fmt.Errorf("script %q: %w: no scripts directory is configured, so only the built-in scripts (%s) may be used",
			ref, ErrNotAllowed, strings.Join(Builtins(), ", "))
	}
	rel, err := beneath(ref, dir)
	if err != nil {
		return nil, nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read script %q: open the scripts directory: %w", ref, err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		if escapes(err) {
			return nil, nil, fmt.Errorf("script %q: %w: it leads out of the scripts directory through a symbolic link", ref, ErrNotAllowed)
		}
		return nil, nil, fmt.Errorf("read script %q: %w", ref, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("read script %q: %w", ref, err)
	}
	if known != nil && unchanged(known, info) {
		return nil, info, nil
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, fmt.Errorf("read script %q: %w", ref, err)
	}
	s, err := Parse(ref, data)
	return s, info, err
}

// unchanged says whether now is the file was describes, with the same
// size and modification time: an edit in place or a new file under the
// name changes one of them.
func unchanged(was, now fs.FileInfo) bool {
	return os.SameFile(was, now) && was.Size() == now.Size() && was.ModTime().Equal(now.ModTime())
}

// beneath returns ref as a path relative to dir, or an error if it is not
// lexically beneath dir. os.Root enforces the rule again at open time; the
// lexical check is what lets the error say which rule a path broke.
func beneath(ref, dir string) (string, error) {
	rel := filepath.Clean(ref)
	if filepath.IsAbs(rel) {
		absDir, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("read script %q: resolve the scripts directory: %w", ref, err)
		}
		if rel, err = filepath.Rel(absDir, rel); err != nil {
			rel = ".."
		}
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("script %q: %w: script files must lie beneath the scripts directory", ref, ErrNotAllowed)
	}
	return rel, nil
}

// escapes reports whether err is os.Root refusing a path that leads out
// of it. The os package does not export that error, only its text.
func escapes(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Err != nil && pe.Err.Error() == "path escapes from parent"
}

// Parse decodes and validates a script. Unknown fields are errors, so a
// typo in a hand-written script fails loudly rather than silently
// dropping a check.
func Parse(name string, data []byte) (*Script, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	s := &Script{Name: name}
	if err := dec.Decode(s); err != nil {
		return nil, fmt.Errorf("script %s: %w", name, err)
	}
	if len(s.Replies) == 0 {
		return nil, fmt.Errorf("script %s has no replies", name)
	}
	if s.PaceMS < 0 || s.PaceMS > 10_000 {
		return nil, fmt.Errorf("script %s: pace_ms must be between 0 and 10000", name)
	}
	if s.ContextTokens < 0 || s.ContextTokens > maxContextTokens {
		return nil, fmt.Errorf("script %s: context_tokens must be between 0 (the default, %d) and %d", name, DefaultContextTokens, maxContextTokens)
	}
	ids := map[string]string{}
	// A repeated reply's ids are call_<turn>_<call> for each turn it
	// plays: spans names them without listing them all, since a script
	// is parsed at every model call.
	type span struct {
		first, n, calls int
		where           string
	}
	var spans []span
	turn := 1
	for i := range s.Replies {
		r := &s.Replies[i]
		if r.Repeat < 0 || r.Repeat > maxRepeat {
			return nil, fmt.Errorf("script %s, reply %d: repeat must be between 0 and %d", name, i+1, maxRepeat)
		}
		r.first = turn
		turn += max(1, r.Repeat)
		if r.Repeat > 1 && len(r.ToolCalls) > 0 {
			spans = append(spans, span{r.first, r.Repeat, len(r.ToolCalls), fmt.Sprintf("script %s, reply %d", name, i+1)})
		}
	}
	inSpan := func(id string) (string, bool) {
		var t, j int
		if n, _ := fmt.Sscanf(id, "call_%d_%d", &t, &j); n != 2 || id != fmt.Sprintf("call_%d_%d", t, j) {
			return "", false
		}
		for _, sp := range spans {
			if t >= sp.first && t < sp.first+sp.n && j >= 1 && j <= sp.calls {
				return sp.where, true
			}
		}
		return "", false
	}
	for i := range s.Replies {
		r := &s.Replies[i]
		for j := range r.ToolCalls {
			c := &r.ToolCalls[j]
			where := fmt.Sprintf("script %s, reply %d, tool call %d", name, i+1, j+1)
			if c.Name == "" {
				return nil, fmt.Errorf("%s: name is missing", where)
			}
			if c.ID != "" && r.Repeat > 1 {
				return nil, fmt.Errorf("%s: a repeated reply's calls take default ids (call_<turn>_<call>); leave id out", where)
			}
			if c.ID == "" {
				c.ID = fmt.Sprintf("call_%d_%d", r.first, j+1)
			}
			if r.Repeat <= 1 {
				prev, dup := ids[c.ID]
				if !dup {
					prev, dup = inSpan(c.ID)
				}
				if dup {
					return nil, fmt.Errorf("%s: id %q is already used by %s", where, c.ID, prev)
				}
				ids[c.ID] = where
			}
			if c.ArgumentsRaw != nil {
				if len(c.Arguments) > 0 {
					return nil, fmt.Errorf("%s: give arguments or arguments_raw, not both", where)
				}
				continue
			}
			if len(c.Arguments) == 0 {
				c.Arguments = json.RawMessage(`{}`)
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(c.Arguments, &obj); err != nil || obj == nil {
				return nil, fmt.Errorf("%s: arguments must be a JSON object (use arguments_raw for anything else)", where)
			}
			var b bytes.Buffer
			if err := json.Compact(&b, c.Arguments); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			c.Arguments = b.Bytes()
		}
		if e := r.Expect; e != nil && e.ToolResults != nil && *e.ToolResults < 0 {
			return nil, fmt.Errorf("script %s, reply %d: expect.tool_results is negative", name, i+1)
		}
	}
	return s, nil
}

// Provider plays one script.
type Provider struct {
	script *Script
	pace   time.Duration
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider for a parsed script.
func New(s *Script) *Provider {
	// A script built in code, not parsed, numbers its replies here.
	turn := 1
	for i := range s.Replies {
		s.Replies[i].first = turn
		turn += max(1, s.Replies[i].Repeat)
	}
	return &Provider{script: s, pace: time.Duration(s.PaceMS) * time.Millisecond}
}

// WithPace returns a copy of p that pauses d before each streamed piece,
// whatever the script says.
func (p *Provider) WithPace(d time.Duration) *Provider {
	c := *p
	c.pace = d
	return &c
}

// Complete plays the reply for this point of the conversation. The model
// name in the request is ignored: the script was chosen when the provider
// was resolved.
func (p *Provider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	s := p.script
	if req.System == compact.SummarySystem {
		return s.summarize(req), nil
	}
	// Nothing below allocates a message's text: a call's cost must not
	// grow with the conversation more than reading it does.
	turns, last := summarised(req.Messages), -1
	for i, m := range req.Messages {
		if m.Role == results.RoleAssistant {
			turns, last = turns+1, i
		}
	}
	in := inputTokens(req)
	if w := s.Window(); in > w {
		return model.Response{}, &model.Error{ContextLength: true,
			Message: fmt.Sprintf("script %s: the request is %d tokens, more than the model's context window of %d", s.Name, in, w)}
	}
	reply, ok := s.play(turns)
	if !ok {
		return model.Response{}, &model.Error{Message: fmt.Sprintf("script %s has %d replies; the conversation asks for reply %d", s.Name, s.plays(), turns+1)}
	}
	if err := check(reply.Expect, req.Messages, last); err != nil {
		return model.Response{}, &model.Error{Message: fmt.Sprintf("script %s, reply %d: %s", s.Name, turns+1, err)}
	}

	msg := results.Message{Role: results.RoleAssistant}
	if reply.Text != "" {
		msg.Parts = []results.Part{results.TextPart(reply.Text)}
	}
	out := len(reply.Text)
	for _, c := range reply.ToolCalls {
		args := string(c.Arguments)
		if c.ArgumentsRaw != nil {
			args = *c.ArgumentsRaw
		}
		msg.ToolCalls = append(msg.ToolCalls, results.ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
		out += len(c.Name) + len(args)
	}
	if model.Streaming(ctx) {
		if err := p.stream(ctx, msg); err != nil {
			return model.Response{}, err
		}
	}
	stop := model.StopEnd
	if len(msg.ToolCalls) > 0 {
		stop = model.StopToolCalls
	}
	return model.Response{
		Message:    msg,
		StopReason: stop,
		// A stand-in for token counts (about four bytes a token) so that
		// usage accounting has numbers to add up; derived from the input
		// alone, like everything else here.
		Usage: model.Usage{InputTokens: in, OutputTokens: tokens(out)},
	}, nil
}

func tokens(n int) int { return (n + 3) / 4 }

// inputTokens is what a request takes of the context window: the
// messages as compaction estimates them, the system prompt and the tool
// definitions, which a real provider counts as input too.
func inputTokens(req model.Request) int {
	n := len(req.System)
	for _, d := range req.Tools {
		n += len(d.Name) + len(d.Description) + len(d.Schema)
	}
	return tokens(n) + compact.Estimate(req.Messages)
}

// play is the reply after turns assistant turns, with the call ids of
// its play when it repeats.
func (s *Script) play(turns int) (Reply, bool) {
	i := sort.Search(len(s.Replies), func(i int) bool { return s.Replies[i].first > turns+1 }) - 1
	if i < 0 || turns >= s.plays() {
		return Reply{}, false
	}
	r := s.Replies[i]
	if k := turns + 1 - r.first; k > 0 {
		calls := slices.Clone(r.ToolCalls)
		for j := range calls {
			calls[j].ID = fmt.Sprintf("call_%d_%d", turns+1, j+1)
		}
		r.ToolCalls = calls
	}
	return r, true
}

// plays is the number of replies the script plays, repeats counted.
func (s *Script) plays() int {
	last := s.Replies[len(s.Replies)-1]
	return last.first - 1 + max(1, last.Repeat)
}

// A compacted conversation has fewer assistant messages than replies
// played: the scripted summary says how many it stands for, so the
// script goes on where it was.
const summaryMarker = "scripted summary of %d replies"

// summarize answers a compaction's request (package compact) with a
// summary that counts the replies it summarises.
func (s *Script) summarize(req model.Request) model.Response {
	text := ""
	for _, m := range req.Messages {
		text += m.Text()
	}
	n, ok := s.countCut(text)
	if !ok {
		n = strings.Count(text, "\n[assistant]\n")
		if strings.HasPrefix(text, "Summarise this conversation:\n\n[assistant]\n") {
			n++
		}
		// A summary being summarised again stands for its replies too.
		n += summarised([]results.Message{results.UserText(text[strings.Index(text, "\n\n")+2:])})
	}
	summary := fmt.Sprintf(summaryMarker, n)
	return model.Response{
		Message:    results.AssistantText(summary),
		StopReason: model.StopEnd,
		Usage:      model.Usage{InputTokens: tokens(len(text)), OutputTokens: tokens(len(summary))},
	}
}

// countCut counts the replies a summary request stands for when its
// middle was cut (compact.SummaryCut), and the replies there cannot be
// counted: by the last call id in the part after the cut that names the
// reply making it, and the replies after that one. ok is false for a
// request that was not cut, or whose kept end names no call of the
// script.
func (s *Script) countCut(text string) (n int, ok bool) {
	i := strings.LastIndex(text, compact.SummaryCut)
	if i < 0 {
		return 0, false
	}
	tail := text[i:]
	for end := len(tail); ; {
		j := strings.LastIndex(tail[:end], "\n(calls ")
		if j < 0 {
			return 0, false
		}
		end = j
		f := strings.Fields(tail[j+len("\n(calls "):])
		if len(f) < 2 {
			continue
		}
		if turn, ok := s.turnOf(f[1]); ok {
			return turn + strings.Count(tail[j:], "\n[assistant]\n"), true
		}
	}
}

// turnOf is the reply, counted from 1, that makes the call id.
func (s *Script) turnOf(id string) (int, bool) {
	for _, r := range s.Replies {
		if r.Repeat > 1 {
			continue
		}
		for _, c := range r.ToolCalls {
			if c.ID == id {
				return r.first, true
			}
		}
	}
	var t, j int
	if n, _ := fmt.Sscanf(id, "call_%d_%d", &t, &j); n == 2 && id == fmt.Sprintf("call_%d_%d", t, j) && t >= 1 && t <= s.plays() {
		return t, true
	}
	return 0, false
}

// summarised is the number of replies a compacted conversation's summary
// stands for, zero when msgs does not open with one.
func summarised(msgs []results.Message) int {
	for _, m := range msgs {
		if m.Role == results.RoleSystem {
			continue
		}
		text := m.Text()
		i := strings.Index(text, "scripted summary of ")
		if m.Role != results.RoleUser || i < 0 {
			return 0
		}
		var n int
		if _, err := fmt.Sscanf(text[i:], summaryMarker, &n); err != nil {
			return 0
		}
		return n
	}
	return 0
}

// check applies an expectation to the messages after index last (the last
// assistant message, -1 for none).
func check(e *Expect, msgs []results.Message, last int) error {
	if e == nil {
		return nil
	}
	since := msgs[last+1:]
	if e.LastRole != "" {
		got := results.Role("nothing")
		if len(msgs) > 0 {
			got = msgs[len(msgs)-1].Role
		}
		if got != e.LastRole {
			return fmt.Errorf("expected the last message to be from %s, got %s", e.LastRole, got)
		}
	}
	if e.ToolResults != nil {
		n := 0
		for _, m := range since {
			if m.Role == results.RoleTool {
				n++
			}
		}
		if n != *e.ToolResults {
			return fmt.Errorf("expected %d tool results since the last reply, got %d", *e.ToolResults, n)
		}
	}
	if e.Contains != "" {
		texts := make([]string, 0, len(since))
		for _, m := range since {
			texts = append(texts, m.Text())
		}
		all := strings.Join(texts, "\n")
		if !strings.Contains(all, e.Contains) {
			return fmt.Errorf("expected the messages since the last reply to contain %q; they read %q", e.Contains, excerpt(all))
		}
	}
	return nil
}

func excerpt(s string) string {
	const max = 200
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + "…"
}
