package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// fakeTurns stands in for Temporal. Its state changes only through
// respond (a test-supplied handler playing the workflow) or finish.
type fakeTurns struct {
	mu sync.Mutex

	agents      []workflows.AgentInfo
	agentsQueue string

	reevaluation  workflows.Reevaluation
	reevaluatedBy []string

	state    workflows.State
	stateErr error
	// children are the states of other turns by id: the turns of the
	// agents the turn's calls ran.
	children map[string]workflows.State

	started   []startCall
	startErr  error
	responses []workflows.Response
	signals   []workflows.Response
	cancels   []string
	runIDs    []string
	// respond plays the workflow's Update handler; nil accepts and
	// returns the card unchanged. It runs under the lock and may change
	// f.state or call f.finishLocked.
	respond func(f *fakeTurns, r workflows.Response) (results.Card, error)

	done      chan struct{}
	result    workflows.Result
	resultErr error
	closed    bool
	history   string
	// runs, when set, are the turn's runs; Export then writes the run's
	// id after the history.
	runs []string
}

type startCall struct {
	id, taskQueue string
	in            workflows.Input
}

func newFake(s workflows.State) *fakeTurns {
	return &fakeTurns{state: s, done: make(chan struct{})}
}

func (f *fakeTurns) Start(_ context.Context, id, tq string, in workflows.Input) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.startErr != nil {
		return "", f.startErr
	}
	f.started = append(f.started, startCall{id, tq, in})
	return "run-1", nil
}

func (f *fakeTurns) State(_ context.Context, id, runID string) (workflows.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runIDs = append(f.runIDs, runID)
	if f.stateErr != nil {
		return workflows.State{}, f.stateErr
	}
	from := f.state
	if c, ok := f.children[id]; ok {
		from = c
	}
	// A copy, as a query returns: the caller must not see later changes.
	b, _ := json.Marshal(from)
	var s workflows.State
	_ = json.Unmarshal(b, &s)
	return s, nil
}

func (f *fakeTurns) Respond(_ context.Context, _, runID string, r workflows.Response) (results.Card, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runIDs = append(f.runIDs, runID)
	f.responses = append(f.responses, r)
	if f.respond != nil {
		return f.respond(f, r)
	}
	card, _ := findCard(f.state.Cards, r.CallID)
	return card, nil
}

func (f *fakeTurns) Reevaluate(_ context.Context, _, by string) (workflows.Reevaluation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reevaluatedBy = append(f.reevaluatedBy, by)
	return f.reevaluation, nil
}

func (f *fakeTurns) Signal(_ context.Context, _, _ string, r workflows.Response) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals = append(f.signals, r)
	return nil
}

func (f *fakeTurns) Cancel(_ context.Context, id, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, id)
	return nil
}

func (f *fakeTurns) Result(ctx context.Context, _, _ string) (workflows.Result, error) {
	select {
	case <-f.done:
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.result, f.resultErr
	case <-ctx.Done():
		return workflows.Result{}, ctx.Err()
	}
}

func (f *fakeTurns) Export(_ context.Context, _, run string, w io.Writer) error {
	h := f.history
	if f.runs != nil {
		h += run
	}
	_, err := io.WriteString(w, h)
	return err
}

func (f *fakeTurns) Runs(context.Context, string) ([]string, error) {
	return f.runs, nil
}

func (f *fakeTurns) Agents(_ context.Context, taskQueue string) ([]workflows.AgentInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agentsQueue = taskQueue
	return f.agents, nil
}

func (f *fakeTurns) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

// finishLocked ends the turn with the current cards; f.mu must be held.
func (f *fakeTurns) finishLocked(status workflows.Status, text string) {
	f.state.Status = status
	f.result = workflows.Result{Status: status, Text: text, Cards: f.state.Cards, Steps: f.state.Step}
	close(f.done)
}

func (f *fakeTurns) finish(status workflows.Status, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finishLocked(status, text)
}

// setCard replaces the card with the same call id; f.mu must be held.
func (f *fakeTurns) setCard(card results.Card) {
	for i := range f.state.Cards {
		if f.state.Cards[i].CallID == card.CallID {
			f.state.Cards[i] = card
			return
		}
	}
	f.state.Cards = append(f.state.Cards, card)
}

// harness runs command lines against one fake.
type harness struct {
	t      *testing.T
	fake   *fakeTurns
	env    map[string]string
	dialed globals
	dialN  int
	dialFn func() (turns, error)
}

func newHarness(t *testing.T, fake *fakeTurns) *harness {
	return &harness{t: t, fake: fake, env: map[string]string{"USER": "ann"}}
}

type outcome struct {
	code           int
	stdout, stderr string
}

func (h *harness) run(stdin string, args ...string) outcome {
	h.t.Helper()
	var out, errb bytes.Buffer
	c := newCLI(strings.NewReader(stdin), &out, &errb, func(k string) string { return h.env[k] })
	c.poll = time.Millisecond
	c.dial = func(_ context.Context, g globals) (turns, error) {
		h.dialed, h.dialN = g, h.dialN+1
		if h.dialFn != nil {
			return h.dialFn()
		}
		return h.fake, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := c.run(ctx, args)
	return outcome{code: code, stdout: out.String(), stderr: errb.String()}
}

// Cards used across tests.

func approvalCard() results.Card {
	return results.Card{CallID: "call_write", Tool: "write_file", State: results.StatePendingApproval,
		Arguments: json.RawMessage(`{"path":"summary.md","content":"hi"}`)}
}

func choiceCard() results.Card {
	return results.Card{CallID: "call_tone", Tool: "ask_user", State: results.StateWaitingAnswer,
		Arguments: json.RawMessage(`{}`),
		Interrupt: &results.Interrupt{Type: results.InterruptChoice, Prompt: "Which tone?",
			Options: []results.Option{{ID: "formal"}, {ID: "friendly", Label: "Friendly and warm"}, {ID: "brief"}}}}
}

func questionCard(schema string) results.Card {
	c := results.Card{CallID: "call_q", Tool: "ask_user", State: results.StateWaitingAnswer,
		Arguments: json.RawMessage(`{}`),
		Interrupt: &results.Interrupt{Type: results.InterruptQuestion, Prompt: "How many?"}}
	if schema != "" {
		c.Interrupt.Schema = json.RawMessage(schema)
	}
	return c
}

func connectionCard() results.Card {
	return results.Card{CallID: "call_issues", Tool: "list_issues", State: results.StateWaitingConnection,
		Arguments:  json.RawMessage(`{}`),
		Connection: &results.ConnectionRequired{Provider: "github", Scopes: []string{"repo"}, Hint: "store a token with ..."}}
}

func succeeded(card results.Card, text string) results.Card {
	card.State = results.StateSucceeded
	card.Interrupt, card.Connection = nil, nil
	card.Output = &results.Success{Parts: []results.Part{results.TextPart(text)}}
	return card
}

func refused(card results.Card, reason string) results.Card {
	card.State = results.StateRefused
	card.Interrupt, card.Connection = nil, nil
	card.Reason = reason
	return card
}
