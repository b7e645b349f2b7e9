package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

func (c *cli) cmdState(ctx context.Context, args []string) error {
	fs := c.flagSet("state")
	var run string
	fs.StringVar(&run, "run", "", "run `id` (default the latest run)")
	id, t, err := c.turnArgs(ctx, fs, args)
	if err != nil {
		return err
	}
	defer t.Close()
	s, err := t.State(ctx, id, run)
	if err != nil {
		return err
	}
	if c.g.json {
		return writeJSON(c.stdout, s)
	}
	printState(c.stdout, id, s)
	printChildTurns(ctx, c.stdout, t, id, "", s, 1)
	return nil
}

// printChildTurns prints, under the turn's state, the turns of the agents its
// calls ran, each with its cards, down the whole chain. A waiting card of
// a child is answered through the top turn under the call path
// (<call>/<child call>), so its hint names both.
func printChildTurns(ctx context.Context, w io.Writer, t turns, top, path string, s workflows.State, depth int) {
	if depth > workflows.MaxAgentDepth {
		return
	}
	indent := strings.Repeat("    ", depth)
	for _, card := range s.Cards {
		if card.Agent == nil || card.Agent.Turn == "" {
			continue
		}
		prefix := path + card.CallID + "/"
		child, err := t.State(ctx, card.Agent.Turn, "")
		if err != nil {
			fmt.Fprintf(w, "%s%s: agent %s, turn %s: %v\n", indent, card.CallID, card.Agent.Name, card.Agent.Turn, err)
			continue
		}
		fmt.Fprintf(w, "%s%s: agent %s (%s), turn %s: %s, step %d, %d call(s)\n", indent, card.CallID, card.Agent.Name,
			strings.Join(card.Agent.Chain, " → "), card.Agent.Turn, child.Status, child.Step, len(child.Cards))
		if child.Error != "" {
			fmt.Fprintf(w, "%s  error: %s\n", indent, child.Error)
		}
		for _, cc := range child.Cards {
			fmt.Fprintf(w, "%s  %-18s %s\n", indent, cc.State, cc.Summary())
			if cc.State.Waiting() && !child.Status.Final() {
				routed := cc
				routed.CallID = prefix + cc.CallID
				fmt.Fprintf(w, "%s  %-18s → %s\n", indent, "", hint(top, routed))
			}
		}
		printChildTurns(ctx, w, t, top, prefix, child, depth+1)
	}
}

// printState is the human view of the state query: the turn's status,
// one line per card, and under each waiting card the commands that
// answer it.
func printState(w io.Writer, id string, s workflows.State) {
	total := len(s.Cards)
	if s.Omitted != nil {
		total += s.Omitted.Total
	}
	fmt.Fprintf(w, "turn %s: %s, step %d, %d call(s)", id, s.Status, s.Step, total)
	if s.Runs > 1 {
		fmt.Fprintf(w, " in %d runs", s.Runs)
	}
	fmt.Fprintln(w)
	if s.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", s.Error)
	}
	if s.Omitted != nil && s.Omitted.Total > 0 {
		// A long turn shows its recent cards; the others are counted.
		var counts []string
		for _, st := range slices.Sorted(maps.Keys(s.Omitted.ByState)) {
			counts = append(counts, fmt.Sprintf("%d %s", s.Omitted.ByState[st], st))
		}
		fmt.Fprintf(w, "  %d earlier call(s) not shown (%s); the last %d follow\n", s.Omitted.Total, strings.Join(counts, ", "), len(s.Cards))
	}
	for _, card := range s.Cards {
		fmt.Fprintf(w, "  %-18s %s\n", card.State, card.Summary())
		if card.State.Waiting() && !s.Status.Final() {
			fmt.Fprintf(w, "  %-18s → %s\n", "", hint(id, card))
		}
	}
	if s.InvalidSignals > 0 {
		fmt.Fprintf(w, "  %d respond signal(s) were dropped as invalid; the last because: %s\n", s.InvalidSignals, s.LastInvalidSignal)
	}
}

// hint is how to answer a waiting card from this command line.
func hint(id string, card results.Card) string {
	call := card.CallID
	switch card.State {
	case results.StatePendingApproval:
		return fmt.Sprintf("starter approve %s %s   or   starter deny %s %s --reason \"...\"", id, call, id, call)
	case results.StateWaitingAnswer:
		if card.Interrupt != nil && card.Interrupt.Type == results.InterruptChoice {
			ids := make([]string, len(card.Interrupt.Options))
			for i, o := range card.Interrupt.Options {
				ids[i] = o.ID
			}
			return fmt.Sprintf("starter answer %s %s {%s}", id, call, strings.Join(ids, "|"))
		}
		if card.Interrupt != nil && len(card.Interrupt.Schema) > 0 {
			return fmt.Sprintf("starter answer %s %s --json-answer 'JSON'", id, call)
		}
		return fmt.Sprintf("starter answer %s %s \"...\"", id, call)
	case results.StateWaitingConnection:
		return fmt.Sprintf("starter connected %s %s   or   starter cancel %s %s", id, call, id, call)
	}
	return ""
}

func (c *cli) cmdWatch(ctx context.Context, args []string) error {
	fs := c.flagSet("watch")
	var run string
	fs.StringVar(&run, "run", "", "run `id` (default the latest run)")
	id, t, err := c.turnArgs(ctx, fs, args)
	if err != nil {
		return err
	}
	defer t.Close()
	return c.watch(ctx, t, id, run, true)
}

// wait is run --wait: watch with the final result as one JSON document
// under --json, so `starter run --wait --json ... | jq .status` works.
func (c *cli) wait(ctx context.Context, t turns, id, runID string) error {
	return c.watch(ctx, t, id, runID, false)
}

// watch follows the turn to its end and reports it. Under --json it
// streams JSON lines when lines is set, and otherwise prints only the
// final Result.
func (c *cli) watch(ctx context.Context, t turns, id, runID string, lines bool) error {
	p := c.newPrinter(id, lines)
	stopLive := c.liveText(ctx, id, p)
	res, err := c.follow(ctx, t, id, runID, func(_ context.Context, s workflows.State) error {
		p.state(s)
		return nil
	})
	stopLive()
	if err != nil {
		return err
	}
	return p.result(res)
}

// follow polls the state until the turn ends and returns its result.
// onState sees every state, and may block (the interactive prompts do);
// its context ends when the turn does, so a prompt does not outlive the
// turn. The result is awaited alongside, because a turn that fails
// before it registers its query handler never answers a state query.
func (c *cli) follow(ctx context.Context, t turns, id, runID string, onState func(context.Context, workflows.State) error) (workflows.Result, error) {
	type outcome struct {
		res workflows.Result
		err error
	}
	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	done := make(chan outcome, 1)
	go func() {
		res, err := t.Result(ctx, id, runID)
		done <- outcome{res, err}
		stopPolling()
	}()
	finish := func(o outcome) (workflows.Result, error) {
		if o.err != nil {
			if ctx.Err() != nil {
				return o.res, errInterrupted
			}
			return o.res, o.err
		}
		// The last poll may predate the end: show the final cards too.
		_ = onState(ctx, workflows.State{Status: o.res.Status, Step: o.res.Steps, Cards: o.res.Cards, InvalidSignals: o.res.InvalidSignals})
		return o.res, nil
	}

	var (
		lastWarning string
		failingFor  time.Time
	)
	// With the stream live, a card change nudges a query at once and the
	// ticker is the fallback.
	nudge, every := c.nudge, c.poll
	if nudge != nil {
		every *= livePollFactor
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		s, err := t.State(pollCtx, id, runID)
		select {
		case o := <-done:
			return finish(o)
		default:
		}
		switch {
		case ctx.Err() != nil:
			return workflows.Result{}, errInterrupted
		case err != nil:
			// The query can fail for a while (the worker is restarting,
			// or the first task has not run yet); the result decides
			// whether the turn is over, so give it a moment to speak
			// first (a turn that does not exist fails both). A query
			// racing the end of a workflow task can fail once and
			// succeed on the next poll, so only a problem that lasts is
			// worth a line, and each new one only once.
			select {
			case o := <-done:
				return finish(o)
			case <-time.After(c.poll):
			}
			if failingFor.IsZero() {
				failingFor = time.Now()
			}
			if msg := err.Error(); msg != lastWarning && time.Since(failingFor) >= queryPatience {
				fmt.Fprintf(c.stderr, "state query: %s (still waiting)\n", msg)
				lastWarning = msg
			}
		default:
			lastWarning, failingFor = "", time.Time{}
			if err := onState(pollCtx, s); err != nil {
				select {
				case o := <-done:
					return finish(o)
				default:
				}
				if ctx.Err() != nil {
					return workflows.Result{}, errInterrupted
				}
				return workflows.Result{}, err
			}
		}
		select {
		case o := <-done:
			return finish(o)
		case <-ctx.Done():
			return workflows.Result{}, errInterrupted
		case <-tick.C:
		case <-nudge:
		}
	}
}

// queryPatience is how long state queries may keep failing before watch
// says so; tests shorten it.
var queryPatience = 2 * time.Second

// printer reports a followed turn: a line per card change (its Summary)
// and per status change, then the result. Under --json with lines set it
// writes one JSON object per change instead.
type printer struct {
	c     *cli
	id    string
	lines bool
	// seen is each call's last printed summary, so a card prints only
	// when it changes.
	seen map[string]string
	// hinted is the waits already told how to answer.
	hinted     map[string]bool
	lastStatus string
	// quietHints: run --interactive asks instead of hinting.
	quietHints bool
	// mu: cards come from the stream and from polls at once.
	mu sync.Mutex
}

func (c *cli) newPrinter(id string, lines bool) *printer {
	return &printer{c: c, id: id, lines: lines, seen: map[string]string{}, hinted: map[string]bool{}}
}

func (p *printer) jsonLines() bool { return p.c.g.json && p.lines }

// state prints what changed since the last state.
func (p *printer) state(s workflows.State) {
	if p.c.g.json && !p.lines {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	status := fmt.Sprintf("%s/%d", s.Status, s.Step)
	if status != p.lastStatus {
		p.lastStatus = status
		if p.jsonLines() {
			p.emit(statusEvent{Type: "status", Status: s.Status, Step: s.Step})
		} else if !s.Status.Final() {
			fmt.Fprintf(p.c.stdout, "· step %d: %s\n", s.Step, s.Status)
		}
	}
	for _, card := range s.Cards {
		p.cardLocked(card)
		if card.State.Waiting() && !p.quietHints && !p.jsonLines() && !s.Status.Final() && !p.hinted[waitKey(card)] {
			p.hinted[waitKey(card)] = true
			fmt.Fprintf(p.c.stdout, "  → %s\n", hint(p.id, card))
		}
	}
}

// card prints one card if it changed.
func (p *printer) card(card results.Card) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cardLocked(card)
}

func (p *printer) cardLocked(card results.Card) {
	sum := card.Summary()
	if p.seen[card.CallID] == sum {
		return
	}
	p.seen[card.CallID] = sum
	if p.c.g.json {
		if p.lines {
			p.emit(cardEvent{Type: "card", Summary: sum, Card: card})
		}
		return
	}
	fmt.Fprintf(p.c.stdout, "%s %s\n", stateMark(card.State), sum)
}

// The JSON lines of watch and run --interactive, "type" first so a
// reader can dispatch on the start of the line.
type (
	statusEvent struct {
		Type   string           `json:"type"`
		Status workflows.Status `json:"status"`
		Step   int              `json:"step"`
	}
	cardEvent struct {
		Type    string       `json:"type"`
		Summary string       `json:"summary"`
		Card    results.Card `json:"card"`
	}
	resultEvent struct {
		Type   string           `json:"type"`
		Result workflows.Result `json:"result"`
	}
)

func (p *printer) emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(p.c.stderr, "encode JSON: %v\n", err)
		return
	}
	fmt.Fprintf(p.c.stdout, "%s\n", b)
}

// result prints the turn's end and returns the exit code it means.
func (p *printer) result(res workflows.Result) error {
	code := statusExit(res.Status)
	switch {
	case p.jsonLines():
		p.emit(resultEvent{Type: "result", Result: res})
	case p.c.g.json:
		if err := writeJSON(p.c.stdout, res); err != nil {
			return err
		}
	default:
		printResult(p.c.stdout, p.id, res)
	}
	if code != exitOK {
		return exitCode(code)
	}
	return nil
}

// printResult is the human view of a finished turn.
func printResult(w io.Writer, id string, res workflows.Result) {
	fmt.Fprintf(w, "\nturn %s %s after %d step(s)", id, res.Status, res.Steps)
	if res.Transfer != nil {
		fmt.Fprintf(w, ", handed to %s", res.Transfer.Target)
	}
	fmt.Fprintln(w)
	if line := usageLine(res); line != "" {
		fmt.Fprintln(w, line)
	}
	if res.Error != "" {
		fmt.Fprintf(w, "error: %s\n", res.Error)
	}
	if res.Transfer != nil && res.Transfer.Message != "" {
		fmt.Fprintf(w, "transfer message: %s\n", res.Transfer.Message)
	}
	if res.Text != "" {
		fmt.Fprintf(w, "\n%s\n", res.Text)
	}
	if len(res.Cards) > 0 {
		fmt.Fprintf(w, "\ncalls:\n")
		for _, card := range res.Cards {
			fmt.Fprintf(w, "  %s %s\n", stateMark(card.State), card.Summary())
			for _, d := range card.Decisions {
				fmt.Fprintf(w, "      %s\n", decisionLine(d))
			}
		}
	}
	if res.InvalidSignals > 0 {
		fmt.Fprintf(w, "\n%d respond signal(s) were dropped as invalid\n", res.InvalidSignals)
	}
}

// usageLine says what the turn used: tokens, cost, compactions.
func usageLine(res workflows.Result) string {
	tokens := res.Usage.InputTokens + res.Usage.OutputTokens
	if tokens == 0 {
		return ""
	}
	line := fmt.Sprintf("used: %d tokens (%d in, %d out)", tokens, res.Usage.InputTokens, res.Usage.OutputTokens)
	if res.Cost > 0 {
		line += fmt.Sprintf(", $%.4f", res.Cost)
	}
	if res.UnpricedCalls > 0 {
		line += fmt.Sprintf(", %d model call(s) of unknown cost", res.UnpricedCalls)
	}
	if res.Compactions > 0 {
		line += fmt.Sprintf(", %d compaction(s)", res.Compactions)
	}
	return line
}

// decisionLine says who decided what, when and why.
func decisionLine(d results.Decision) string {
	s := string(d.Decision)
	if d.By != "" {
		s += " by " + d.By
	}
	if !d.At.IsZero() {
		s += " at " + d.At.UTC().Format(time.RFC3339)
	}
	if len(d.Answer) > 0 {
		s += ": " + string(d.Answer)
	}
	if d.Reason != "" {
		s += " (" + d.Reason + ")"
	}
	if len(d.Arguments) > 0 {
		s += " with edited arguments"
	}
	return s
}

// stateMark is a one-character cue in front of a card's line.
func stateMark(s results.State) string {
	switch {
	case s.Waiting():
		return "?"
	case s == results.StateRunning:
		return "…"
	case s == results.StateSucceeded:
		return "✓"
	case s == results.StateFailed:
		return "✗"
	case s == results.StateRefused:
		return "⊘"
	}
	return "·"
}

// statusExit maps how a turn ended to the exit code.
func statusExit(s workflows.Status) int {
	switch s {
	case workflows.StatusCompleted:
		return exitOK
	case workflows.StatusTransferred:
		return exitTransferred
	}
	return exitFailed
}

// waitKey names one wait of one call. A call can wait more than once
// (a tool that asks again after an answer); each answer adds a decision,
// so the count tells the waits apart.
func waitKey(card results.Card) string {
	return fmt.Sprintf("%s#%d", card.CallID, len(card.Decisions))
}

var errNoInput = errors.New("stdin closed")
