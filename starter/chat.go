package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/workflows"
)

// sessions is what chat asks of Temporal beyond turns: the AgentSession
// contract (the send and end Updates, the conversation Query).
type sessions interface {
	turns
	// StartSession starts an AgentSession.
	StartSession(ctx context.Context, id, taskQueue string, in workflows.SessionInput) error
	// Send sends the send Update under updateID and returns the turn
	// that answers the message.
	Send(ctx context.Context, sessionID, updateID string, m workflows.Send) (workflows.Sent, error)
	// Conversation runs the conversation Query (with the running turn's
	// waiting calls).
	Conversation(ctx context.Context, sessionID string) (workflows.Conversation, error)
	// End sends the end Update.
	End(ctx context.Context, sessionID string, e workflows.End) (workflows.Conversation, error)
}

type chatFlags struct {
	turnFlags
	agent       string
	session     string
	by          string
	turnsPerRun int
}

// chatCommands are what chat reads as commands rather than messages.
const chatCommands = "/end closes the session, /quit (or Ctrl-D) leaves it open to come back to"

func (c *cli) cmdChat(ctx context.Context, args []string) error {
	fs := c.flagSet("chat")
	var f chatFlags
	fs.StringVar(&f.session, "session", "", "resume the session with this `id` (its settings are the ones it started with)")
	fs.StringVar(&f.agent, "agent", "", "a new session of the worker's named `agent` (starter agents lists them): a transfer hands the conversation to another agent and the session goes on")
	fs.StringVar(&f.model, "model", chatModel, "model of a new session as `provider:name`")
	fs.StringVar(&f.tools, "tools", "", "comma-separated tool `names` the model may call (default for scripted:chat and scripted:demo: "+strings.Join(demoTools, ",")+"; otherwise none)")
	fs.Var(&f.approve, "approve", "always ask before running `tool` (repeatable or comma list; * for every tool)")
	fs.StringVar(&f.timeout, "timeout", "", "how long a call waits for a person: a `duration` such as 30m, 24h, 7d (default 24h)")
	fs.IntVar(&f.maxSteps, "max-steps", 0, "model calls per turn before it stops with status max_steps (default 16)")
	fs.StringVar(&f.system, "system", "", "system `prompt`")
	fs.StringVar(&f.user, "user", "", "`user` who owns the session's turns (default $USER, else cli)")
	fs.StringVar(&f.by, "by", "", "name recorded on messages and answers (default $USER, else cli)")
	fs.IntVar(&f.turnsPerRun, "turns-per-run", 0, "turns before the session continues as new (default 100)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 0, 0, ""); err != nil {
		return err
	}
	if c.g.json {
		return usagef("chat is a conversation at the terminal and has no --json output; scripts use the send Update and the conversation Query")
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if f.session != "" {
		for _, name := range []string{"agent", "model", "tools", "approve", "timeout", "max-steps", "system", "user", "turns-per-run"} {
			if set[name] {
				return usagef("--%s applies to a new session; --session resumes one with the settings it started with", name)
			}
		}
	}
	var in workflows.SessionInput
	if f.session == "" {
		if in, err = c.sessionInput(f, set); err != nil {
			return err
		}
	}

	t, err := c.dial(ctx, c.g)
	if err != nil {
		return err
	}
	defer t.Close()
	s, ok := t.(sessions)
	if !ok {
		return errors.New("this client cannot talk to sessions")
	}
	ch := &chat{c: c, s: s, id: f.session, by: c.responder(f.by), in: newLineReader(c.stdin)}
	if ch.id == "" {
		ch.id = newSessionID()
		if err := s.StartSession(ctx, ch.id, c.g.taskQueue, in); err != nil {
			return err
		}
		runs := "model " + in.Turn.Model
		if in.Turn.Agent != "" {
			runs = "agent " + in.Turn.Agent
		}
		fmt.Fprintf(c.stderr, "started session %s on task queue %s (%s)\n%s; come back with: starter chat --session %s\n",
			ch.id, c.g.taskQueue, runs, chatCommands, ch.id)
	} else if err := ch.resume(ctx); err != nil {
		return err
	}
	return ch.loop(ctx)
}

// sessionInput is what every turn of a new session runs with, from the
// flags as run builds a turn's.
func (c *cli) sessionInput(f chatFlags, set map[string]bool) (workflows.SessionInput, error) {
	in := workflows.SessionInput{TurnsPerRun: f.turnsPerRun}
	turn := &in.Turn
	turn.Agent, turn.System = f.agent, f.system
	// An agent brings its own model and tools; flags only narrow them.
	if f.agent == "" || set["model"] {
		turn.Model = f.model
	}
	if err := f.applyPolicy(turn, set, f.agent != ""); err != nil {
		return in, err
	}
	if set["turns-per-run"] && (f.turnsPerRun < 1 || f.turnsPerRun > workflows.MaxTurnsPerRun) {
		return in, usagef("--turns-per-run must be between 1 and %d", workflows.MaxTurnsPerRun)
	}
	turn.User = f.user
	if turn.User == "" {
		turn.User = defaultPerson(c.getenv)
	}
	if turn.Model == "" && turn.Agent == "" {
		return in, usagef("no model: give --model provider:name")
	}
	return in, nil
}

// chat is one terminal conversation with a session.
type chat struct {
	c  *cli
	s  sessions
	id string
	by string
	in *lineReader
}

// resume shows where the session stands and follows its running turn.
func (ch *chat) resume(ctx context.Context) error {
	conv, err := ch.s.Conversation(ctx, ch.id)
	if err != nil {
		return err
	}
	out := ch.c.stdout
	if n := conv.Earlier.Total; n > 0 {
		fmt.Fprintf(out, "(%d earlier turns)\n", n)
	}
	for _, rec := range conv.Turns {
		if rec.ID == conv.Running {
			continue
		}
		fmt.Fprintf(out, "you> %s\n", rec.Text)
		ch.printRecord(rec)
	}
	if conv.Status != workflows.SessionOpen {
		return ch.closed(conv)
	}
	fmt.Fprintf(ch.c.stderr, "resumed session %s; %s\n", ch.id, chatCommands)
	if conv.Running != "" {
		for _, rec := range conv.Turns {
			if rec.ID == conv.Running {
				fmt.Fprintf(out, "you> %s\n", rec.Text)
			}
		}
		if _, err := ch.follow(ctx, conv.Running); err != nil {
			return err
		}
	}
	for _, q := range conv.Pending {
		fmt.Fprintf(out, "you> %s\n", q.Text)
		if _, err := ch.follow(ctx, q.TurnID); err != nil {
			return err
		}
	}
	return nil
}

func (ch *chat) printRecord(rec workflows.TurnRecord) {
	out := ch.c.stdout
	switch {
	case rec.Status == workflows.StatusCompleted:
		fmt.Fprintf(out, "agent> %s\n", rec.Reply)
	case rec.Error != "":
		fmt.Fprintf(out, "(turn %s %s: %s)\n", rec.ID, rec.Status, rec.Error)
	default:
		if rec.Reply != "" {
			fmt.Fprintf(out, "agent> %s\n", rec.Reply)
		}
		fmt.Fprintf(out, "(turn %s %s)\n", rec.ID, rec.Status)
	}
}

// loop reads messages until the person ends or leaves the session.
func (ch *chat) loop(ctx context.Context) error {
	for {
		line, err := ch.in.prompt(ctx, ch.c.stdout, "you> ")
		switch {
		case errors.Is(err, errNoInput):
			return ch.leave()
		case ctx.Err() != nil:
			return fmt.Errorf("%w; the session %s stays open: starter chat --session %s", errInterrupted, ch.id, ch.id)
		case err != nil:
			return err
		}
		text := strings.TrimSpace(line)
		switch text {
		case "":
			continue
		case "/quit":
			return ch.leave()
		case "/end":
			conv, err := ch.s.End(ctx, ch.id, workflows.End{By: ch.by, Reason: "ended from starter chat"})
			if err != nil {
				return err
			}
			return ch.closed(conv)
		case "/help":
			fmt.Fprintln(ch.c.stdout, chatCommands)
			continue
		}
		sent, err := ch.s.Send(ctx, ch.id, newUpdateID(), workflows.Send{Text: line, By: ch.by})
		var rejected *rejectedError
		if errors.As(err, &rejected) {
			fmt.Fprintf(ch.c.stdout, "rejected: %s\n", rejected.msg)
			continue
		}
		if err != nil {
			return err
		}
		if sent.Queued {
			fmt.Fprintf(ch.c.stdout, "(queued as %s: another turn is running)\n", sent.TurnID)
		}
		res, err := ch.follow(ctx, sent.TurnID)
		if err != nil {
			return err
		}
		if res.Status == workflows.StatusTransferred {
			conv, err := ch.s.Conversation(ctx, ch.id)
			if err != nil {
				return err
			}
			return ch.closed(conv)
		}
	}
}

// follow waits for a turn to start (a queued one), then follows it as
// run --interactive does, answering its waits here, and prints the reply.
func (ch *chat) follow(ctx context.Context, turnID string) (workflows.Result, error) {
	if err := ch.waitStarted(ctx, turnID); err != nil {
		return workflows.Result{}, err
	}
	p := ch.c.newPrinter(turnID, true)
	p.quietHints = true
	stopLive := ch.c.liveText(ctx, turnID, p)
	a := &asker{t: ch.s, id: turnID, by: ch.by, out: ch.c.stdout, in: ch.in, p: p, answered: map[string]bool{}}
	res, err := ch.c.follow(ctx, ch.s, turnID, "", func(ctx context.Context, s workflows.State) error {
		for _, card := range s.Cards {
			p.card(card)
		}
		if s.Status.Final() {
			return nil
		}
		return a.handle(ctx, s)
	})
	streamed := stopLive()
	if err != nil {
		if errors.Is(err, errNoInput) {
			return res, fmt.Errorf("%w while turn %s waits for an answer; it keeps waiting: starter chat --session %s", err, turnID, ch.id)
		}
		return res, err
	}
	if err := ch.waitRecorded(ctx, turnID); err != nil {
		return res, err
	}
	out := ch.c.stdout
	if res.Text != "" && !strings.HasSuffix(streamed, res.Text) {
		// Unless it was just printed as it streamed.
		fmt.Fprintf(out, "agent> %s\n", res.Text)
	}
	switch res.Status {
	case workflows.StatusCompleted:
	case workflows.StatusTransferred:
		fmt.Fprintf(out, "(turn %s handed the conversation to %s)\n", turnID, res.Transfer.Target)
	default:
		if res.Error != "" {
			fmt.Fprintf(out, "(turn %s %s: %s)\n", turnID, res.Status, res.Error)
		} else {
			fmt.Fprintf(out, "(turn %s %s)\n", turnID, res.Status)
		}
	}
	return res, nil
}

// waitStarted waits until a queued turn has started (or ended), polling
// the conversation: a turn's workflow does not exist before it starts.
func (ch *chat) waitStarted(ctx context.Context, turnID string) error {
	for {
		conv, err := ch.s.Conversation(ctx, ch.id)
		if err != nil {
			return err
		}
		queued := false
		for _, q := range conv.Pending {
			queued = queued || q.TurnID == turnID
		}
		if !queued {
			return nil
		}
		if conv.Status != workflows.SessionOpen {
			return fmt.Errorf("the session ended (%s) before turn %s started", conv.Status, turnID)
		}
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-time.After(ch.c.poll):
		}
	}
}

// waitRecorded waits, briefly, until the session has taken in the end of
// a turn, so the next message starts its turn at once instead of queueing
// behind one that has already answered.
func (ch *chat) waitRecorded(ctx context.Context, turnID string) error {
	deadline := time.Now().Add(recordPatience)
	for {
		conv, err := ch.s.Conversation(ctx, ch.id)
		if err != nil || conv.Running != turnID || time.Now().After(deadline) {
			// A query that fails now will fail with the next message too,
			// and say so there.
			return nil
		}
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-time.After(ch.c.poll):
		}
	}
}

// recordPatience bounds waitRecorded: the session takes in a turn's end
// in one workflow task.
const recordPatience = 5 * time.Second

func (ch *chat) leave() error {
	fmt.Fprintf(ch.c.stderr, "left session %s; it stays open: starter chat --session %s\n", ch.id, ch.id)
	return nil
}

// closed reports a session that takes no more messages; a transfer exits
// 3, as run does for a turn that transfers.
func (ch *chat) closed(conv workflows.Conversation) error {
	switch conv.Status {
	case workflows.SessionTransferred:
		fmt.Fprintf(ch.c.stdout, "session %s was handed to %s", ch.id, conv.Transfer.Target)
		if conv.Transfer.Message != "" {
			fmt.Fprintf(ch.c.stdout, " (%s)", conv.Transfer.Message)
		}
		fmt.Fprintln(ch.c.stdout)
		return exitCode(exitTransferred)
	default:
		fmt.Fprintf(ch.c.stdout, "session %s %s after %d turn(s)\n", ch.id, conv.Status, conv.TurnsStarted)
		return nil
	}
}

func newSessionID() string { return "session-" + randomHex(4) }

// newUpdateID names one message; the server keeps one Update per id.
func newUpdateID() string { return "send-" + randomHex(8) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The sessions contract over a real client.

func (t *temporalTurns) StartSession(ctx context.Context, id, taskQueue string, in workflows.SessionInput) error {
	_, err := tollgate.Client{Temporal: t.c, TaskQueue: taskQueue}.StartSession(ctx, id, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return fmt.Errorf("a session with id %s is already running; resume it with --session %s", id, id)
	}
	return t.explainSession(err, id, "start the session")
}

func (t *temporalTurns) Send(ctx context.Context, sessionID, updateID string, m workflows.Send) (workflows.Sent, error) {
	uctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	sent, err := tollgate.Client{Temporal: t.c}.SendOnce(uctx, sessionID, updateID, m)
	var rejected *tollgate.RejectedError
	var timeout *client.WorkflowUpdateServiceTimeoutOrCanceledError
	switch {
	case err == nil:
		return sent, nil
	case errors.As(err, &rejected):
		return sent, &rejectedError{msg: rejected.Reason}
	case ctx.Err() == nil && (uctx.Err() != nil || errors.As(err, &timeout)):
		return sent, fmt.Errorf("no worker accepted the message for session %s within %s; is a worker running on its task queue?", sessionID, rpcTimeout)
	}
	return sent, t.explainSession(err, sessionID, "send the message")
}

func (t *temporalTurns) Conversation(ctx context.Context, sessionID string) (workflows.Conversation, error) {
	qctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	conv, err := tollgate.Client{Temporal: t.c}.Conversation(qctx, sessionID)
	var deadline *serviceerror.DeadlineExceeded
	if err != nil && ctx.Err() == nil && (qctx.Err() != nil || errors.As(err, &deadline)) {
		return conv, fmt.Errorf("no worker answered the conversation query of %s in time; is a worker running on its task queue?", sessionID)
	}
	return conv, t.explainSession(err, sessionID, "query the conversation")
}

func (t *temporalTurns) End(ctx context.Context, sessionID string, e workflows.End) (workflows.Conversation, error) {
	uctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	conv, err := tollgate.Client{Temporal: t.c}.End(uctx, sessionID, e)
	var rejected *tollgate.RejectedError
	if errors.As(err, &rejected) {
		return conv, &rejectedError{msg: rejected.Reason}
	}
	return conv, t.explainSession(err, sessionID, "end the session")
}

// explainSession is explain in a session's words.
func (t *temporalTurns) explainSession(err error, id, doing string) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) && !strings.Contains(nf.Error(), "already completed") {
		return fmt.Errorf("no session %s in namespace %s at %s: %w", id, t.namespace, t.address, err)
	}
	return t.explain(err, id, doing)
}

var _ sessions = (*temporalTurns)(nil)
