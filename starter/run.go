package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tollgate-dev/tollgate/workflows"
)

// demoModel and demoTools: the scripted demo reads a file, writes one and
// asks a question, so those are the tools it needs to run end to end.
// chatModel is its counterpart for sessions, a conversation of several
// turns with the same tools.
const (
	demoModel = "scripted:demo"
	chatModel = "scripted:chat"
)

var demoTools = []string{"read_file", "write_file", "ask_user"}

// scriptedTools are the tools a built-in scripted model needs; none for
// other models.
func scriptedTools(model string) []string {
	if model == demoModel || model == chatModel {
		return append([]string(nil), demoTools...)
	}
	return nil
}

// turnFlags are the flags run and chat share: what a turn runs with.
type turnFlags struct {
	model    string
	tools    string
	approve  listFlag
	timeout  string
	maxSteps int
	system   string
	user     string
}

// applyPolicy sets in's tools, approvals, response timeout and max steps
// from the flags that were given. Without --tools, a turn of a built-in
// scripted model gets the tools its script calls, unless keepTools says
// in's own tools (from an input file) stand.
func (f turnFlags) applyPolicy(in *workflows.Input, set map[string]bool, keepTools bool) error {
	if set["tools"] {
		var l listFlag
		_ = l.Set(f.tools) // never fails
		in.Tools = l
	} else if !keepTools {
		in.Tools = scriptedTools(in.Model)
	}
	for _, name := range f.approve {
		if in.Policy.Approval == nil {
			in.Policy.Approval = map[string]string{}
		}
		in.Policy.Approval[name] = "always"
	}
	if set["timeout"] {
		d, err := workflows.ParseDuration(f.timeout)
		if err != nil {
			return usagef("--timeout: %v", err)
		}
		if d < 0 {
			return usagef("--timeout %s is negative", f.timeout)
		}
		in.Policy.ResponseTimeout = workflows.Duration(d)
	}
	if set["max-steps"] {
		if f.maxSteps < 1 {
			return usagef("--max-steps must be at least 1")
		}
		in.MaxSteps = f.maxSteps
	}
	return nil
}

type runFlags struct {
	turnFlags
	agent       string
	id          string
	input       string
	wait        bool
	interactive bool
	by          string
}

// listFlag is a repeatable flag; each use may also hold a comma list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

func (c *cli) cmdRun(ctx context.Context, args []string) error {
	fs := c.flagSet("run")
	var f runFlags
	fs.StringVar(&f.model, "model", demoModel, "model as `provider:name` (scripted:demo, openai:gpt-4.1, anthropic:claude-sonnet-4-5, ollama:llama3.2, ...)")
	fs.StringVar(&f.tools, "tools", "", "comma-separated tool `names` the model may call (default for scripted:demo: "+strings.Join(demoTools, ",")+"; otherwise none)")
	fs.Var(&f.approve, "approve", "always ask before running `tool` (repeatable or comma list; * for every tool)")
	fs.StringVar(&f.timeout, "timeout", "", "how long a call waits for a person before it is refused: a `duration` such as 30m, 24h, 7d (policy.response_timeout; default 24h)")
	fs.IntVar(&f.maxSteps, "max-steps", 0, "model calls before the turn stops with status max_steps (default 16)")
	fs.StringVar(&f.system, "system", "", "system `prompt`")
	fs.StringVar(&f.user, "user", "", "`user` who owns the turn; tools look up account connections for them (default $USER, else cli)")
	fs.StringVar(&f.agent, "agent", "", "run the worker's named `agent` (starter agents lists them): its model, instructions, tools and policy, which --model, --system, --tools and --approve narrow")
	fs.StringVar(&f.id, "id", "", "workflow `id` (default tollgate-<random>)")
	fs.StringVar(&f.input, "input", "", "read the full turn input from this JSON `file` (- for stdin); flags given explicitly and the prompt argument override it")
	fs.BoolVar(&f.wait, "wait", false, "wait for the turn to end, print each card as it changes and the result")
	fs.BoolVar(&f.interactive, "interactive", false, "answer approvals, questions and connection requests at this terminal until the turn ends")
	fs.StringVar(&f.by, "by", "", "name recorded on answers given with --interactive (default $USER, else cli)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 0, 1, "prompt"); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if f.input == "-" && f.interactive {
		return usagef("--input - reads stdin, which --interactive needs for answers; give a file")
	}
	in, err := c.buildInput(f, set, pos)
	if err != nil {
		return err
	}
	id := f.id
	if id == "" {
		id = newID()
	}

	t, err := c.dial(ctx, c.g)
	if err != nil {
		return err
	}
	defer t.Close()
	runID, err := t.Start(ctx, id, c.g.taskQueue, in)
	if err != nil {
		return err
	}
	if !f.wait && !f.interactive {
		if c.g.json {
			return writeJSON(c.stdout, map[string]string{"workflow_id": id, "run_id": runID})
		}
		// The id alone on stdout, so ID=$(starter run ...) works; the
		// hints go to stderr.
		fmt.Fprintln(c.stdout, id)
		fmt.Fprintf(c.stderr, "started turn %s on task queue %s; follow it with: starter watch %s\n", id, c.g.taskQueue, id)
		return nil
	}
	fmt.Fprintf(c.stderr, "started turn %s on task queue %s (model %s)\n", id, c.g.taskQueue, in.Model)
	if f.interactive {
		return c.interact(ctx, t, id, runID, c.responder(f.by))
	}
	return c.wait(ctx, t, id, runID)
}

// buildInput assembles the turn input: the --input file if any, then the
// flags that were given (or, without a file, their defaults), then the
// prompt argument.
func (c *cli) buildInput(f runFlags, set map[string]bool, pos []string) (workflows.Input, error) {
	var in workflows.Input
	fromFile := f.input != ""
	if fromFile {
		var err error
		if in, err = c.readInput(f.input); err != nil {
			return in, err
		}
	}
	if set["agent"] {
		in.Agent = f.agent
	}
	// --model applies when set, and at its default only when there is no
	// input file to respect and no agent, which brings its own model.
	if set["model"] || (!fromFile && in.Agent == "") {
		in.Model = f.model
	}
	if err := f.applyPolicy(&in, set, fromFile || in.Agent != ""); err != nil {
		return in, err
	}
	if set["system"] {
		in.System = f.system
	}
	if set["user"] {
		in.User = f.user
	}
	if in.User == "" {
		in.User = defaultPerson(c.getenv)
	}
	if len(pos) == 1 {
		in.Prompt = pos[0]
	}
	if in.Model == "" && in.Agent == "" {
		return in, usagef("no model: give --model provider:name, or \"model\" in the --input file")
	}
	if in.Prompt == "" && len(in.Messages) == 0 {
		return in, usagef(`missing prompt (starter run "what to do", or --input file.json)`)
	}
	return in, nil
}

// readInput reads a full turn input. Unknown fields are an error: a
// misspelt "max_step" silently ignored would run a different turn than
// the one asked for.
func (c *cli) readInput(name string) (workflows.Input, error) {
	var in workflows.Input
	var r io.Reader
	if name == "-" {
		r = c.stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return in, usagef("--input: %v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return in, fmt.Errorf("read --input %s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, usagef("--input %s is not a turn input: %v", name, err)
	}
	return in, nil
}

// newID is a workflow id short enough to type.
func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "tollgate-" + hex.EncodeToString(b)
}

// defaultPerson names whoever runs the command: $USER, else "cli".
func defaultPerson(getenv func(string) string) string {
	if u := getenv("USER"); u != "" {
		return u
	}
	return "cli"
}

func (c *cli) responder(by string) string {
	if by != "" {
		return by
	}
	return defaultPerson(c.getenv)
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}
