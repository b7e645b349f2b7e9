package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// interact is run --interactive: follow the turn, print each card as it
// changes, and ask at the terminal for every wait, in call order.
func (c *cli) interact(ctx context.Context, t turns, id, runID, by string) error {
	p := c.newPrinter(id, true)
	p.quietHints = true
	stopLive := c.liveText(ctx, id, p)
	defer stopLive()
	// Under --json stdout carries only JSON lines; the conversation with
	// the person moves to stderr.
	out := c.stdout
	if c.g.json {
		out = c.stderr
	}
	a := &asker{t: t, id: id, runID: runID, by: by, out: out, in: newLineReader(c.stdin), p: p, answered: map[string]bool{}}
	res, err := c.follow(ctx, t, id, runID, func(ctx context.Context, s workflows.State) error {
		p.state(s)
		if s.Status.Final() {
			return nil
		}
		return a.handle(ctx, s)
	})
	if err != nil {
		if errors.Is(err, errNoInput) {
			return fmt.Errorf("%w while the turn waits for an answer; the turn keeps waiting (starter state %s shows how to answer it)", err, id)
		}
		return err
	}
	return p.result(res)
}

// asker puts each wait to the person and sends their response.
type asker struct {
	t         turns
	id, runID string
	by        string
	out       io.Writer
	in        *lineReader
	p         *printer
	// answered holds the waits this terminal has answered, so a state
	// polled before the answer landed does not ask twice.
	answered map[string]bool
}

func (a *asker) handle(ctx context.Context, s workflows.State) error {
	for _, card := range s.Cards {
		if !card.State.Waiting() || a.answered[waitKey(card)] {
			continue
		}
		if err := a.resolve(ctx, card); err != nil {
			return err
		}
	}
	return nil
}

// resolve asks about one wait until the turn accepts an answer or the
// wait ends some other way (another client answered, the response
// timeout refused it).
func (a *asker) resolve(ctx context.Context, card results.Card) error {
	key := waitKey(card)
	for {
		r, err := a.ask(ctx, card)
		if err != nil {
			return err
		}
		r.CallID, r.By = card.CallID, a.by
		got, err := a.t.Respond(ctx, a.id, a.runID, r)
		var rejected *rejectedError
		switch {
		case err == nil:
			a.answered[key] = true
			a.p.card(got)
			return nil
		case errors.As(err, &rejected):
			fmt.Fprintf(a.out, "rejected: %s\n", rejected.msg)
		default:
			return err
		}
		// Ask again only if the same wait is still open. If the state
		// cannot be read just now, ask again anyway: the validator will
		// say if the wait has gone, and a turn that ends cancels the
		// prompt.
		s, err := a.t.State(ctx, a.id, a.runID)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(a.out, "state query: %v\n", err)
			continue
		}
		current, ok := findCard(s.Cards, card.CallID)
		if !ok || !current.State.Waiting() || waitKey(current) != key {
			a.answered[key] = true
			fmt.Fprintf(a.out, "%s is no longer waiting for this answer\n", card.CallID)
			return nil
		}
		card = current
	}
}

// ask shows the wait and reads the person's response (without call id
// and responder, which resolve fills in).
func (a *asker) ask(ctx context.Context, card results.Card) (workflows.Response, error) {
	fmt.Fprintln(a.out)
	switch card.State {
	case results.StatePendingApproval:
		return a.askApproval(ctx, card)
	case results.StateWaitingAnswer:
		return a.askAnswer(ctx, card)
	case results.StateWaitingConnection:
		return a.askConnection(ctx, card)
	}
	return workflows.Response{}, fmt.Errorf("call %s is %s, which takes no answer", card.CallID, card.State)
}

func (a *asker) askApproval(ctx context.Context, card results.Card) (workflows.Response, error) {
	fmt.Fprintf(a.out, "%s wants to run %s\n", card.CallID, card.Tool)
	if in := card.Interrupt; in != nil {
		if in.Prompt != "" {
			fmt.Fprintf(a.out, "  %s\n", in.Prompt)
		}
		if in.Plan != "" {
			fmt.Fprintf(a.out, "  plan:\n%s\n", indent(in.Plan, "    "))
		}
	}
	fmt.Fprintf(a.out, "  arguments:\n%s\n", indent(prettyJSON(card.EffectiveArguments()), "    "))
	for {
		line, err := a.in.prompt(ctx, a.out, "[a]pprove, [d]eny, [e]dit arguments? ")
		if err != nil {
			return workflows.Response{}, err
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "a", "approve", "y", "yes":
			return workflows.Response{Decision: results.DecisionApprove}, nil
		case "d", "deny", "n", "no":
			reason, err := a.in.prompt(ctx, a.out, "reason (told to the model; empty for none): ")
			if err != nil {
				return workflows.Response{}, err
			}
			return workflows.Response{Decision: results.DecisionDeny, Reason: strings.TrimSpace(reason)}, nil
		case "e", "edit":
			args, err := a.in.readJSON(ctx, a.out, "new arguments as JSON (an empty line ends a multi-line value):")
			if err != nil {
				return workflows.Response{}, err
			}
			return workflows.Response{Decision: results.DecisionApprove, Arguments: args}, nil
		default:
			fmt.Fprintln(a.out, "please answer a, d or e")
		}
	}
}

func (a *asker) askAnswer(ctx context.Context, card results.Card) (workflows.Response, error) {
	in := card.Interrupt
	if in == nil {
		return workflows.Response{}, fmt.Errorf("call %s waits for an answer but carries no question", card.CallID)
	}
	fmt.Fprintf(a.out, "%s (%s) asks: %s\n", card.CallID, card.Tool, in.Prompt)
	if in.Type == results.InterruptChoice {
		for i, o := range in.Options {
			if o.Label != "" && o.Label != o.ID {
				fmt.Fprintf(a.out, "  %d) %s  %s\n", i+1, o.ID, o.Label)
			} else {
				fmt.Fprintf(a.out, "  %d) %s\n", i+1, o.ID)
			}
		}
		for {
			line, err := a.in.prompt(ctx, a.out, fmt.Sprintf("choose 1-%d: ", len(in.Options)))
			if err != nil {
				return workflows.Response{}, err
			}
			if id, ok := pickOption(in.Options, line); ok {
				answer, _ := json.Marshal(id)
				return workflows.Response{Decision: results.DecisionAnswer, Answer: answer}, nil
			}
			fmt.Fprintf(a.out, "%q is not one of the options\n", strings.TrimSpace(line))
		}
	}
	if len(in.Schema) > 0 {
		fmt.Fprintf(a.out, "  the answer is JSON matching: %s\n", results.CompactJSON(in.Schema))
		for {
			line, err := a.in.prompt(ctx, a.out, "answer: ")
			if err != nil {
				return workflows.Response{}, err
			}
			answer, err := schemaAnswer(in.Schema, line)
			if err == nil {
				return workflows.Response{Decision: results.DecisionAnswer, Answer: answer}, nil
			}
			fmt.Fprintf(a.out, "%v; try again\n", err)
		}
	}
	line, err := a.in.prompt(ctx, a.out, "answer: ")
	if err != nil {
		return workflows.Response{}, err
	}
	answer, _ := json.Marshal(strings.TrimSpace(line))
	return workflows.Response{Decision: results.DecisionAnswer, Answer: answer}, nil
}

func (a *asker) askConnection(ctx context.Context, card results.Card) (workflows.Response, error) {
	conn := card.Connection
	if conn == nil {
		return workflows.Response{}, fmt.Errorf("call %s waits for a connection but names none", card.CallID)
	}
	fmt.Fprintf(a.out, "%s (%s) needs a %s connection\n", card.CallID, card.Tool, conn.Provider)
	if len(conn.Scopes) > 0 {
		fmt.Fprintf(a.out, "  scopes: %s\n", strings.Join(conn.Scopes, ", "))
	}
	if conn.Hint != "" {
		fmt.Fprintf(a.out, "  how: %s\n", conn.Hint)
	}
	for {
		line, err := a.in.prompt(ctx, a.out, "[c]onnected, or [x] decline? ")
		if err != nil {
			return workflows.Response{}, err
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "c", "connected":
			return workflows.Response{Decision: results.DecisionConnected}, nil
		case "x", "decline":
			// Declining ends the wait; the turn tells the model the tool
			// could not run without the connection.
			return workflows.Response{Decision: results.DecisionCancel, Reason: "declined the " + conn.Provider + " connection"}, nil
		default:
			fmt.Fprintln(a.out, "please answer c or x")
		}
	}
}

// pickOption accepts an option's number or its id.
func pickOption(opts []results.Option, line string) (string, bool) {
	line = strings.TrimSpace(line)
	if n, err := strconv.Atoi(line); err == nil && n >= 1 && n <= len(opts) {
		return opts[n-1].ID, true
	}
	for _, o := range opts {
		if o.ID == line {
			return o.ID, true
		}
	}
	return "", false
}

// schemaAnswer reads an answer to a question with a schema as JSON. Text
// that is not JSON is taken as a string when the schema asks for one, so
// nobody has to type quotes around a name.
func schemaAnswer(schema json.RawMessage, line string) (json.RawMessage, error) {
	line = strings.TrimSpace(line)
	if json.Valid([]byte(line)) {
		return json.RawMessage(line), nil
	}
	var s struct {
		Type any `json:"type"`
	}
	_ = json.Unmarshal(schema, &s)
	if s.Type == "string" {
		b, _ := json.Marshal(line)
		return b, nil
	}
	return nil, fmt.Errorf("that is not valid JSON")
}

func findCard(cards []results.Card, id string) (results.Card, bool) {
	for _, c := range cards {
		if c.CallID == id {
			return c, true
		}
	}
	return results.Card{}, false
}

func prettyJSON(b json.RawMessage) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		// The model's arguments may not be JSON at all; show them as is.
		return string(b)
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	return string(out)
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// lineReader reads stdin lines on its own goroutine, so a prompt can
// give up when the turn ends or Ctrl-C arrives instead of blocking in
// Read.
type lineReader struct {
	lines chan string
}

func newLineReader(r io.Reader) *lineReader {
	l := &lineReader{lines: make(chan string)}
	go func() {
		defer close(l.lines)
		sc := bufio.NewScanner(r)
		// Pasted JSON arguments can be long.
		sc.Buffer(make([]byte, 64*1024), 4<<20)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
	}()
	return l
}

// prompt writes the question and returns the next line.
func (l *lineReader) prompt(ctx context.Context, w io.Writer, question string) (string, error) {
	if question != "" {
		fmt.Fprint(w, question)
	}
	select {
	case line, ok := <-l.lines:
		if !ok {
			fmt.Fprintln(w)
			return "", errNoInput
		}
		return line, nil
	case <-ctx.Done():
		fmt.Fprintln(w)
		return "", ctx.Err()
	}
}

// readJSON reads lines until they form one JSON value. An empty line
// with nothing valid so far says what is wrong and starts over.
func (l *lineReader) readJSON(ctx context.Context, w io.Writer, question string) (json.RawMessage, error) {
	fmt.Fprintln(w, question)
	var buf strings.Builder
	for {
		line, err := l.prompt(ctx, w, "")
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(line) == "" {
			if buf.Len() == 0 {
				continue
			}
			var v any
			err := json.Unmarshal([]byte(buf.String()), &v)
			fmt.Fprintf(w, "that is not valid JSON (%v); enter the arguments again:\n", err)
			buf.Reset()
			continue
		}
		buf.WriteString(line)
		buf.WriteString("\n")
		if s := strings.TrimSpace(buf.String()); json.Valid([]byte(s)) {
			return json.RawMessage(s), nil
		}
	}
}
