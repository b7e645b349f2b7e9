package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// respondFlags are shared by every verb that answers a waiting call.
type respondFlags struct {
	by     string
	groups string
	reason string
	run    string
	signal bool
}

func (c *cli) respondFlagSet(name, reasonHelp string) (*flag.FlagSet, *respondFlags) {
	fs := c.flagSet(name)
	f := &respondFlags{}
	fs.StringVar(&f.by, "by", "", "`name` recorded as who answered (default $USER, else cli)")
	fs.StringVar(&f.groups, "groups", "", "comma-separated `groups` the answerer belongs to, for calls an approval rule leaves to a group (docs/approvals.md)")
	fs.StringVar(&f.reason, "reason", "", reasonHelp)
	fs.StringVar(&f.run, "run", "", "run `id` (default the latest run)")
	fs.BoolVar(&f.signal, "signal", false, "send the respond Signal instead of the Update: fire and forget, for systems that can only signal")
	return fs, f
}

func (c *cli) cmdApprove(ctx context.Context, args []string) error {
	fs, f := c.respondFlagSet("approve", "optional `reason`, kept with the decision")
	var edited, remember string
	var rememberArgs bool
	fs.StringVar(&remember, "remember", "", "remember the approval: `session` or user, so the tool's next calls run without asking (docs/approvals.md)")
	fs.BoolVar(&rememberArgs, "remember-args", false, "with --remember, only for these same arguments")
	fs.StringVar(&edited, "args", "", "run the tool with these arguments instead (`JSON`, or @file); validated against the tool's schema, and the model is told")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 2, 2, "ID and CALL"); err != nil {
		return err
	}
	r := workflows.Response{CallID: pos[1], Decision: results.DecisionApprove, Remember: remember, RememberArgs: rememberArgs}
	if edited != "" {
		if r.Arguments, err = jsonArg("--args", edited); err != nil {
			return err
		}
	}
	return c.send(ctx, pos[0], f, r)
}

func (c *cli) cmdDeny(ctx context.Context, args []string) error {
	fs, f := c.respondFlagSet("deny", "why, told to the model and kept with the decision")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 2, 2, "ID and CALL"); err != nil {
		return err
	}
	return c.send(ctx, pos[0], f, workflows.Response{CallID: pos[1], Decision: results.DecisionDeny})
}

func (c *cli) cmdAnswer(ctx context.Context, args []string) error {
	fs, f := c.respondFlagSet("answer", "optional `reason`, kept with the decision")
	var raw bool
	fs.BoolVar(&raw, "json-answer", false, "ANSWER is JSON (for questions with a schema), not text to send as a JSON string")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 3, 3, "ID, CALL and ANSWER"); err != nil {
		return err
	}
	answer, err := encodeAnswer(pos[2], raw)
	if err != nil {
		return err
	}
	return c.send(ctx, pos[0], f, workflows.Response{CallID: pos[1], Decision: results.DecisionAnswer, Answer: answer})
}

func (c *cli) cmdConnected(ctx context.Context, args []string) error {
	fs, f := c.respondFlagSet("connected", "optional `reason`, kept with the decision")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 2, 2, "ID and CALL"); err != nil {
		return err
	}
	return c.send(ctx, pos[0], f, workflows.Response{CallID: pos[1], Decision: results.DecisionConnected})
}

func (c *cli) cmdCancel(ctx context.Context, args []string) error {
	fs, f := c.respondFlagSet("cancel", "with CALL: why the wait ends, kept with the decision")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 1, 2, "ID"); err != nil {
		return err
	}
	if len(pos) == 2 {
		return c.send(ctx, pos[0], f, workflows.Response{CallID: pos[1], Decision: results.DecisionCancel})
	}
	// Without a call it is the workflow's own cancellation: the turn
	// refuses its waiting calls, cancels running tools and returns what
	// it has. The respond-only flags would be silently meaningless.
	if f.signal || f.reason != "" || f.by != "" {
		return usagef("--signal, --reason and --by go with cancel ID CALL; cancel ID cancels the whole turn")
	}
	t, err := c.dial(ctx, c.g)
	if err != nil {
		return err
	}
	defer t.Close()
	id := pos[0]
	if err := t.Cancel(ctx, id, f.run); err != nil {
		return err
	}
	if c.g.json {
		return writeJSON(c.stdout, map[string]any{"workflow_id": id, "cancel_requested": true})
	}
	fmt.Fprintf(c.stdout, "cancellation of %s requested: waiting calls are refused, running tools cancelled, and the turn returns what it has (starter watch %s)\n", id, id)
	return nil
}

// send delivers one response as an Update (the default: validated, and
// the call's new card comes back) or as a Signal.
func (c *cli) send(ctx context.Context, id string, f *respondFlags, r workflows.Response) error {
	r.By = c.responder(f.by)
	r.Reason = f.reason
	for _, g := range strings.Split(f.groups, ",") {
		if g = strings.TrimSpace(g); g != "" {
			r.Groups = append(r.Groups, g)
		}
	}
	t, err := c.dial(ctx, c.g)
	if err != nil {
		return err
	}
	defer t.Close()
	if f.signal {
		if err := t.Signal(ctx, id, f.run, r); err != nil {
			return err
		}
		if c.g.json {
			return writeJSON(c.stdout, map[string]any{"workflow_id": id, "call_id": r.CallID, "signal_sent": true})
		}
		fmt.Fprintf(c.stdout, "sent %s for %s as a signal; it is checked when the turn reads it, and a rejected one is only counted (starter state %s)\n", r.Decision, r.CallID, id)
		return nil
	}
	card, err := t.Respond(ctx, id, f.run, r)
	if err != nil {
		return err
	}
	if c.g.json {
		return writeJSON(c.stdout, card)
	}
	fmt.Fprintln(c.stdout, card.Summary())
	return nil
}

// encodeAnswer makes the answer's JSON. By default the text is a JSON
// string, which is what a choice (an option id) and a plain question
// take; a question with a schema may want an object, hence --json-answer.
func encodeAnswer(s string, raw bool) (json.RawMessage, error) {
	if raw {
		if !json.Valid([]byte(s)) {
			return nil, usagef("--json-answer: %q is not valid JSON (to send text, leave out --json-answer)", s)
		}
		return json.RawMessage(s), nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode the answer: %w", err)
	}
	return b, nil
}

// jsonArg reads a JSON flag value, inline or from @file.
func jsonArg(name, v string) (json.RawMessage, error) {
	b := []byte(v)
	if file, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if b, err = os.ReadFile(file); err != nil {
			return nil, usagef("%s: %v", name, err)
		}
	}
	if !json.Valid(b) {
		return nil, usagef("%s is not valid JSON", name)
	}
	return json.RawMessage(b), nil
}
