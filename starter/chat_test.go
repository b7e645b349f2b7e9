package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// fakeSessions plays one session: each message starts a turn that turn
// builds (a fakeTurns, finished or waiting), and the turns' verbs go to
// the turn they name.
type fakeSessions struct {
	mu      sync.Mutex
	id      string
	started []workflows.SessionInput
	sent    []workflows.Send
	ids     []string
	ended   []workflows.End
	conv    workflows.Conversation
	turn    func(text string) *fakeTurns
	turns   map[string]*fakeTurns
	sendErr error
	queued  []string
	taken   map[string]bool
}

func newFakeSessions(turn func(text string) *fakeTurns) *fakeSessions {
	return &fakeSessions{turn: turn, turns: map[string]*fakeTurns{}, taken: map[string]bool{}, conv: workflows.Conversation{Status: workflows.SessionOpen}}
}

// finished is a turn that has already answered.
func finished(status workflows.Status, text string) *fakeTurns {
	f := newFake(workflows.State{Status: status})
	f.finish(status, text)
	return f
}

func (f *fakeSessions) StartSession(_ context.Context, id, _ string, in workflows.SessionInput) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.id = id
	f.started = append(f.started, in)
	return nil
}

func (f *fakeSessions) Send(_ context.Context, sessionID, updateID string, m workflows.Send) (workflows.Sent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sendErr != nil {
		err := f.sendErr
		f.sendErr = nil
		return workflows.Sent{}, err
	}
	f.sent = append(f.sent, m)
	f.ids = append(f.ids, updateID)
	id := fmt.Sprintf("%s/turn-%d", sessionID, len(f.sent))
	f.turns[id] = f.turn(m.Text)
	if f.conv.Running != "" {
		// The real session would queue it; chat waits for the session
		// to take in each turn's end, so this never happens.
		f.queued = append(f.queued, id)
		return workflows.Sent{TurnID: id, Queued: true}, nil
	}
	f.conv.Running = id
	return workflows.Sent{TurnID: id}, nil
}

// Conversation plays the session taking in a turn's end only when asked
// after its result was read, as the real one lags its turn's result.
func (f *fakeSessions) Conversation(context.Context, string) (workflows.Conversation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.taken[f.conv.Running] {
		f.conv.Running = ""
	}
	return f.conv, nil
}

func (f *fakeSessions) End(_ context.Context, _ string, e workflows.End) (workflows.Conversation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = append(f.ended, e)
	f.conv.Status = workflows.SessionEnded
	f.conv.TurnsStarted = len(f.sent)
	return f.conv, nil
}

func (f *fakeSessions) get(id string) *fakeTurns {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.turns[id]
	if !ok {
		panic("no turn " + id)
	}
	return t
}

func (f *fakeSessions) Start(context.Context, string, string, workflows.Input) (string, error) {
	return "", errors.New("chat starts no turns itself")
}

func (f *fakeSessions) State(ctx context.Context, id, runID string) (workflows.State, error) {
	return f.get(id).State(ctx, id, runID)
}

func (f *fakeSessions) Respond(ctx context.Context, id, runID string, r workflows.Response) (results.Card, error) {
	return f.get(id).Respond(ctx, id, runID, r)
}

func (f *fakeSessions) Reevaluate(ctx context.Context, id, by string) (workflows.Reevaluation, error) {
	return f.get(id).Reevaluate(ctx, id, by)
}

func (f *fakeSessions) Signal(ctx context.Context, id, runID string, r workflows.Response) error {
	return f.get(id).Signal(ctx, id, runID, r)
}

func (f *fakeSessions) Cancel(ctx context.Context, id, runID string) error {
	return f.get(id).Cancel(ctx, id, runID)
}

func (f *fakeSessions) Result(ctx context.Context, id, runID string) (workflows.Result, error) {
	res, err := f.get(id).Result(ctx, id, runID)
	f.mu.Lock()
	f.taken[id] = true
	f.mu.Unlock()
	return res, err
}

func (f *fakeSessions) Export(context.Context, string, string, io.Writer) error {
	return errors.New("not a turn")
}

func (f *fakeSessions) Runs(context.Context, string) ([]string, error) {
	return nil, errors.New("not a turn")
}

func (f *fakeSessions) Agents(context.Context, string) ([]workflows.AgentInfo, error) {
	return nil, errors.New("not a turn")
}

func (f *fakeSessions) Close() {}

func runChat(t *testing.T, f *fakeSessions, stdin string, args ...string) outcome {
	t.Helper()
	h := newHarness(t, nil)
	h.dialFn = func() (turns, error) { return f, nil }
	return h.run(stdin, append([]string{"chat"}, args...)...)
}

// A new session: each line is a message, each reply is printed, and
// /end closes the session.
func TestChatStartsASessionAndTalks(t *testing.T) {
	f := newFakeSessions(func(text string) *fakeTurns { return finished(workflows.StatusCompleted, "You said: "+text) })
	o := runChat(t, f, "hello\n\nhow are you?\n/end\n", "--by", "bo")
	require.Equal(t, 0, o.code, "stdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)

	require.Len(t, f.started, 1)
	in := f.started[0]
	assert.Equal(t, chatModel, in.Turn.Model, "a new session talks with the scripted chat model")
	assert.Equal(t, demoTools, in.Turn.Tools)
	assert.Equal(t, "ann", in.Turn.User, "the turns belong to $USER")
	assert.Empty(t, in.Turn.Prompt)
	assert.True(t, strings.HasPrefix(f.id, "session-"))

	assert.Equal(t, []workflows.Send{{Text: "hello", By: "bo"}, {Text: "how are you?", By: "bo"}}, f.sent, "blank lines are not messages")
	assert.NotEqual(t, f.ids[0], f.ids[1], "each message has its own update id")
	assert.Contains(t, o.stdout, "agent> You said: hello\n")
	assert.Contains(t, o.stdout, "agent> You said: how are you?\n")
	assert.Empty(t, f.queued, "each message waits until the session has taken in the turn before")
	assert.Equal(t, []workflows.End{{By: "bo", Reason: "ended from starter chat"}}, f.ended)
	assert.Contains(t, o.stdout, "session "+f.id+" ended after 2 turn(s)")
	assert.Contains(t, o.stderr, "come back with: starter chat --session "+f.id)
}

// A turn that waits for an approval is answered inline, as run
// --interactive does; leaving keeps the session open.
func TestChatAnswersApprovalsInline(t *testing.T) {
	f := newFakeSessions(func(string) *fakeTurns {
		turn := newFake(workflows.State{Status: workflows.StatusWaiting, Step: 1, Cards: []results.Card{approvalCard()}})
		turn.respond = func(t *fakeTurns, r workflows.Response) (results.Card, error) {
			card := succeeded(approvalCard(), "wrote summary.md")
			t.setCard(card)
			t.finishLocked(workflows.StatusCompleted, "Written.")
			return card, nil
		}
		return turn
	})
	o := runChat(t, f, "write the summary\na\n", "--model", "openai:gpt-4.1", "--tools", "write_file", "--approve", "write_file", "--user", "ada")
	require.Equal(t, 0, o.code, "stdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
	in := f.started[0].Turn
	assert.Equal(t, "openai:gpt-4.1", in.Model)
	assert.Equal(t, []string{"write_file"}, in.Tools)
	assert.Equal(t, map[string]string{"write_file": "always"}, in.Policy.Approval)
	assert.Equal(t, "ada", in.User)

	turn := f.get(f.id + "/turn-1")
	require.Len(t, turn.responses, 1)
	assert.Equal(t, workflows.Response{CallID: "call_write", Decision: results.DecisionApprove, By: "ann"}, turn.responses[0])
	assert.Contains(t, o.stdout, "call_write wants to run write_file")
	assert.Contains(t, o.stdout, "agent> Written.")
	assert.Empty(t, f.ended, "leaving is not ending")
	assert.Contains(t, o.stderr, "left session "+f.id+"; it stays open")
}

// --session shows the conversation so far, follows the turn that is
// running (answering its wait), and goes on with new messages.
func TestChatResumesASession(t *testing.T) {
	f := newFakeSessions(func(text string) *fakeTurns { return finished(workflows.StatusCompleted, "Again: "+text) })
	running := newFake(workflows.State{Status: workflows.StatusWaiting, Cards: []results.Card{choiceCard()}})
	running.respond = func(t *fakeTurns, r workflows.Response) (results.Card, error) {
		card := succeeded(choiceCard(), "friendly")
		t.setCard(card)
		t.finishLocked(workflows.StatusCompleted, "Friendly it is.")
		return card, nil
	}
	f.turns["s1/turn-3"] = running
	f.sent = make([]workflows.Send, 3)
	f.conv = workflows.Conversation{
		Status:  workflows.SessionOpen,
		Running: "s1/turn-3",
		Earlier: workflows.TurnCounts{Total: 1},
		Turns: []workflows.TurnRecord{
			{ID: "s1/turn-2", Status: workflows.StatusFailed, Text: "second", Error: "the model call failed: no"},
			{ID: "s1/turn-3", Status: workflows.StatusRunning, Text: "third"},
		},
	}
	o := runChat(t, f, "2\nfourth\n", "--session", "s1")
	require.Equal(t, 0, o.code, "stdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
	assert.Empty(t, f.started, "resuming starts nothing")
	for _, want := range []string{
		"(1 earlier turns)",
		"you> second\n(turn s1/turn-2 failed: the model call failed: no)",
		"you> third\n",
		"call_tone (ask_user) asks: Which tone?",
		"agent> Friendly it is.",
		"agent> Again: fourth",
	} {
		assert.Contains(t, o.stdout, want)
	}
	assert.Equal(t, "fourth", f.sent[3].Text)
}

func TestChatShowsRejectionsAndGoesOn(t *testing.T) {
	f := newFakeSessions(func(text string) *fakeTurns { return finished(workflows.StatusCompleted, "ok") })
	f.sendErr = &rejectedError{msg: "16 messages already wait for their turn"}
	o := runChat(t, f, "first\nsecond\n/quit\n")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, "rejected: 16 messages already wait for their turn")
	assert.Equal(t, []workflows.Send{{Text: "second", By: "ann"}}, f.sent)
}

// A turn that hands the conversation over ends the chat with exit 3, as
// run does.
func TestChatEndsOnTransfer(t *testing.T) {
	f := newFakeSessions(func(string) *fakeTurns {
		turn := newFake(workflows.State{})
		turn.mu.Lock()
		turn.result = workflows.Result{Status: workflows.StatusTransferred, Text: "Over to billing.", Transfer: &results.Transfer{Target: "billing"}}
		close(turn.done)
		turn.mu.Unlock()
		return turn
	})
	f.conv = workflows.Conversation{Status: workflows.SessionTransferred, Transfer: &results.Transfer{Target: "billing", Message: "refund"}}
	o := runChat(t, f, "refund please\nnever read\n")
	require.Equal(t, exitTransferred, o.code, o.stderr)
	assert.Contains(t, o.stdout, "agent> Over to billing.")
	assert.Contains(t, o.stdout, "session "+f.id+" was handed to billing (refund)")
	assert.Len(t, f.sent, 1)
}

func TestChatUsage(t *testing.T) {
	f := newFakeSessions(nil)
	o := runChat(t, f, "", "--session", "s1", "--model", "openai:gpt-4.1")
	assert.Equal(t, exitRejected, o.code)
	assert.Contains(t, o.stderr, "--model applies to a new session")
	o = runChat(t, f, "", "--json")
	assert.Equal(t, exitRejected, o.code)
	assert.Contains(t, o.stderr, "no --json output")
	o = runChat(t, f, "", "--turns-per-run", "0")
	assert.Equal(t, exitRejected, o.code)
}

func TestChatWithAnAgentLeavesItsModelAndToolsToIt(t *testing.T) {
	f := newFakeSessions(func(text string) *fakeTurns { return finished(workflows.StatusCompleted, "Triage here.") })
	o := runChat(t, f, "hello\n/end\n", "--agent", "triage")
	require.Equal(t, 0, o.code, "stdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
	in := f.started[0].Turn
	assert.Equal(t, "triage", in.Agent)
	assert.Empty(t, in.Model)
	assert.Nil(t, in.Tools)
	assert.Contains(t, o.stderr, "(agent triage)")
}
