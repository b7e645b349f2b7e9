package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/transcript"
	"github.com/tollgate-dev/tollgate/tool"
)

const sessionID = "chat"

// sessionHarness runs AgentSession with real child AgentTurns, the fake
// model and the test tools on testsuite. The transcript store and the
// model outlive one harness, so a test can run the next run of a session
// that continued as new in a new environment, as a new worker would.
type sessionHarness struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	model *fakeModel
	store *transcript.Store
	log   *toolLog
	// turns holds each child turn's result by workflow id; models holds
	// the CallModel inputs in order, to see what each call sent.
	mu     sync.Mutex
	turns  map[string]Result
	inputs []activities.CallModelInput
	// tools are the RunTool activities started, as "call@queue".
	tools []string
	seq   int
}

// updateIDs numbers Updates across harnesses: a session remembers its
// sends' Update ids across continue-as-new, so the runs a test chains
// must not reuse one for another message.
var updateIDs atomic.Int64

func newSessionHarness(t *testing.T, replies ...results.Message) *sessionHarness {
	t.Helper()
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	return newSessionHarnessWith(t, &fakeModel{replies: replies}, store, Features{})
}

func newSessionHarnessWith(t *testing.T, m *fakeModel, store *transcript.Store, f Features) *sessionHarness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(testWorkerOptions)
	env.SetStartTime(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: sessionID})
	h := &sessionHarness{t: t, env: env, model: m, store: store, log: &toolLog{}, turns: map[string]Result{}}
	reg, err := tool.NewRegistry(append(testTools(t, h.log, &sync.Map{}), fastTools(h.log)...)...)
	require.NoError(t, err)
	// The turns run on the session's worker: they have its workspace
	// queue.
	env.RegisterWorkflowWithOptions(Features{WorkspaceQueue: f.WorkspaceQueue}.AgentTurn, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterWorkflowWithOptions(f.AgentSession, workflow.RegisterOptions{Name: SessionWorkflowName})
	env.RegisterActivity(&activities.Activities{Tools: reg, Models: m, Transcripts: store, Workspace: t.TempDir()})
	env.SetOnChildWorkflowCompletedListener(func(info *workflow.Info, v converter.EncodedValue, err error) {
		var res Result
		if err == nil && v != nil && v.Get(&res) == nil {
			h.mu.Lock()
			h.turns[info.WorkflowExecution.ID] = res
			h.mu.Unlock()
		}
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name == activities.RunToolName {
			var in activities.RunToolInput
			if args.Get(&in) == nil {
				h.mu.Lock()
				h.tools = append(h.tools, in.CallID+"@"+info.TaskQueue)
				h.mu.Unlock()
			}
			return
		}
		if info.ActivityType.Name != activities.CallModelName {
			return
		}
		var in activities.CallModelInput
		if args.Get(&in) == nil {
			h.mu.Lock()
			h.inputs = append(h.inputs, in)
			h.mu.Unlock()
		}
	})
	return h
}

func (h *sessionHarness) start(in SessionInput) {
	if in.Turn.Model == "" {
		in.Turn.Model = "fake:model"
	}
	h.env.ExecuteWorkflow(SessionWorkflowName, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
}

// run starts the session and returns its result; the session must end.
func (h *sessionHarness) run(in SessionInput) SessionResult {
	h.t.Helper()
	h.start(in)
	require.NoError(h.t, h.env.GetWorkflowError())
	var res SessionResult
	require.NoError(h.t, h.env.GetWorkflowResult(&res))
	return res
}

// continued starts the session and returns the input of the run it
// continued as.
func (h *sessionHarness) continued(in SessionInput) SessionInput {
	h.t.Helper()
	h.start(in)
	var can *workflow.ContinueAsNewError
	require.True(h.t, errors.As(h.env.GetWorkflowError(), &can), "the session did not continue as new: %v", h.env.GetWorkflowError())
	require.Equal(h.t, SessionWorkflowName, can.WorkflowType.Name)
	var next SessionInput
	require.NoError(h.t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

// sendOutcome is how a send (or end) Update ended.
type sendOutcome struct {
	rejected     error
	rejectedKind string
	err          error
	sent         Sent
	conversation Conversation
	done         bool
}

func (h *sessionHarness) update(name string, arg any, got *sendOutcome) {
	h.updateThen(name, arg, got, func() {})
}

// updateThen sends an Update and runs accepted once the handler runs.
func (h *sessionHarness) updateThen(name string, arg any, got *sendOutcome, accepted func()) {
	h.updateAs(name, fmt.Sprintf("%s-%d", name, updateIDs.Add(1)), arg, got, accepted)
}

// sendAs sends a message under a chosen Update id.
func (h *sessionHarness) sendAs(delay time.Duration, updateID, text string, got *sendOutcome) {
	h.env.RegisterDelayedCallback(func() { h.updateAs(SendName, updateID, Send{Text: text, By: "ada"}, got, func() {}) }, delay)
}

func (h *sessionHarness) updateAs(name, updateID string, arg any, got *sendOutcome, accepted func()) {
	h.env.UpdateWorkflow(name, updateID, &testsuite.TestUpdateCallback{
		OnAccept: accepted,
		OnReject: func(err error) {
			if got == nil {
				return
			}
			got.rejected = err
			var app *temporal.ApplicationError
			if errors.As(err, &app) {
				got.rejected, got.rejectedKind = errors.New(app.Message()), app.Type()
			}
		},
		OnComplete: func(v any, err error) {
			if got == nil {
				return
			}
			got.done, got.err = true, err
			switch v := v.(type) {
			case Sent:
				got.sent = v
			case Conversation:
				got.conversation = v
			}
		},
	}, arg)
}

func (h *sessionHarness) send(delay time.Duration, text string, got *sendOutcome) {
	h.env.RegisterDelayedCallback(func() { h.update(SendName, Send{Text: text, By: "ada"}, got) }, delay)
}

func (h *sessionHarness) signal(delay time.Duration, payload any) {
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(SendName, payload) }, delay)
}

func (h *sessionHarness) end(delay time.Duration, e End, got *sendOutcome) {
	h.env.RegisterDelayedCallback(func() { h.update(EndName, e, got) }, delay)
}

// respond answers a call of one of the session's turns.
func (h *sessionHarness) respond(delay time.Duration, turnID string, r Response, got *updateOutcome) {
	h.env.RegisterDelayedCallback(func() {
		h.seq++
		err := h.env.UpdateWorkflowByID(turnID, RespondName, fmt.Sprintf("r-%d", h.seq), &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) {
				if got != nil {
					got.rejected = err
				}
			},
			OnComplete: func(v any, err error) {
				if got != nil {
					got.completed, got.err = true, err
				}
			},
		}, r)
		require.NoError(h.t, err)
	}, delay)
}

func (h *sessionHarness) conversation() Conversation {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(ConversationQuery)
	require.NoError(h.t, err)
	var c Conversation
	require.NoError(h.t, v.Get(&c))
	return c
}

func (h *sessionHarness) at(delay time.Duration, f func()) { h.env.RegisterDelayedCallback(f, delay) }

func (h *sessionHarness) turn(id string) Result {
	h.mu.Lock()
	defer h.mu.Unlock()
	res, ok := h.turns[id]
	require.True(h.t, ok, "turn %s did not complete", id)
	return res
}

func texts(ms []results.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		s := m.Text()
		if m.Role == results.RoleTool {
			s = "tool:" + m.ToolCallID
		}
		for _, c := range m.ToolCalls {
			s += " call:" + c.ID
		}
		out[i] = string(m.Role) + ": " + strings.TrimSpace(s)
	}
	return out
}

func TestSessionTurnsContinueTheConversationByHead(t *testing.T) {
	h := newSessionHarness(t, results.AssistantText("Hello, Ada."), results.AssistantText("You said hello."))
	var first, second sendOutcome
	var mid Conversation
	h.send(time.Minute, "hello", &first)
	h.send(2*time.Minute, "what did I say?", &second)
	h.at(3*time.Minute, func() { mid = h.conversation() })
	h.end(4*time.Minute, End{By: "ada", Reason: "done"}, nil)
	res := h.run(SessionInput{Turn: Input{System: "be brief", User: "ada"}})

	require.NoError(t, first.rejected)
	require.Equal(t, Sent{TurnID: "chat/turn-1"}, first.sent, "an idle session answers once the turn has started")
	require.Equal(t, Sent{TurnID: "chat/turn-2"}, second.sent)

	require.Equal(t, SessionOpen, mid.Status)
	require.Len(t, mid.Turns, 2)
	require.Equal(t, "hello", mid.Turns[0].Text)
	require.Equal(t, "ada", mid.Turns[0].By)
	require.Equal(t, StatusCompleted, mid.Turns[0].Status)
	require.Equal(t, "Hello, Ada.", mid.Turns[0].Reply)
	require.Equal(t, "You said hello.", mid.Turns[1].Reply)
	require.Empty(t, mid.Running)
	require.Equal(t, 2, mid.TurnsStarted)

	require.Equal(t, SessionEnded, res.Status)
	require.Equal(t, "ada", res.EndedBy)
	require.Equal(t, "done", res.EndReason)
	require.NotEmpty(t, res.Head)
	require.Empty(t, res.Messages, "a completed turn's reply is the last stored message")

	// The second turn saw the whole conversation, but its model call sent
	// only the new message: the rest came from the store by head.
	require.Equal(t, []string{"user: hello", "assistant: Hello, Ada.", "user: what did I say?"}, texts(h.model.requests[1].Messages))
	require.Equal(t, "be brief", h.model.requests[1].System)
	require.Len(t, h.inputs, 2)
	require.Equal(t, h.turn("chat/turn-1").Head, h.inputs[1].Transcript)
	require.Equal(t, []string{"user: what did I say?"}, texts(h.inputs[1].Messages))
	require.Equal(t, res.Head, h.turn("chat/turn-2").Head)
}

// Messages that arrive while a turn waits for a person (by Update and by
// Signal) queue and run in order once it ends; each later turn sees the
// whole conversation before it.
func TestSessionQueuesMessagesWhileATurnRuns(t *testing.T) {
	h := newSessionHarness(t,
		calls("Writing.", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		results.AssistantText("Written."),
		results.AssistantText("Second answer."),
		results.AssistantText("Third answer."))
	var first, second sendOutcome
	var waiting Conversation
	var turnState State
	h.send(time.Minute, "write a.md", &first)
	h.send(2*time.Minute, "and then this", &second)
	h.signal(3*time.Minute, Send{Text: "and a signal", By: "webhook"})
	h.at(4*time.Minute, func() {
		waiting = h.conversation()
		v, err := h.env.QueryWorkflowByID("chat/turn-1", StateQuery)
		require.NoError(t, err)
		require.NoError(t, v.Get(&turnState))
	})
	h.respond(5*time.Minute, "chat/turn-1", Response{CallID: "w1", Decision: results.DecisionApprove, By: "ada"}, nil)
	h.end(6*time.Minute, End{}, nil)
	res := h.run(SessionInput{Turn: Input{Tools: []string{"write"}}})

	require.Equal(t, Sent{TurnID: "chat/turn-1"}, first.sent)
	require.Equal(t, Sent{TurnID: "chat/turn-2", Queued: true}, second.sent, "a message sent while a turn runs is queued at once")

	require.Equal(t, "chat/turn-1", waiting.Running)
	require.Equal(t, StatusRunning, waiting.Turns[0].Status)
	require.Equal(t, []Queued{
		{TurnID: "chat/turn-2", Text: "and then this", By: "ada", At: time.Date(2026, 11, 30, 9, 2, 0, 0, time.UTC)},
		{TurnID: "chat/turn-3", Text: "and a signal", By: "webhook", At: time.Date(2026, 11, 30, 9, 3, 0, 0, time.UTC)},
	}, normalise(waiting.Pending))
	require.Equal(t, StatusWaiting, turnState.Status, "the running turn answers its own state query")

	require.Equal(t, SessionEnded, res.Status)
	require.Len(t, res.Turns, 3)
	for i, want := range []string{"Written.", "Second answer.", "Third answer."} {
		require.Equal(t, StatusCompleted, res.Turns[i].Status)
		require.Equal(t, want, res.Turns[i].Reply)
	}
	require.Equal(t, []string{"write:a.md=x"}, h.log.all())
	require.Equal(t, []string{
		"user: write a.md", "assistant: Writing. call:w1", "tool: tool:w1", "assistant: Written.",
		"user: and then this", "assistant: Second answer.",
		"user: and a signal",
	}, texts(h.model.last()))
}

// normalise drops the monotonic clock and location from times that
// went through JSON, so structs compare.
func normalise(qs []Queued) []Queued {
	for i := range qs {
		qs[i].At = qs[i].At.UTC()
	}
	return qs
}

// After TurnsPerRun turns the session continues as new between turns,
// carrying a message queued by Update during the last turn, a Signal, the
// head and the counters; the next run (on a new worker) runs the queued
// message against the whole conversation.
func TestSessionContinuesAsNewWithAQueuedMessage(t *testing.T) {
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	model := &fakeModel{replies: []results.Message{
		calls("Writing.", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		results.AssistantText("Written."),
		results.AssistantText("Queued one answered."),
		results.AssistantText("Signal answered."),
	}}
	h := newSessionHarnessWith(t, model, store, Features{})
	var first, queued sendOutcome
	h.send(time.Minute, "write a.md", &first)
	h.send(2*time.Minute, "queued by update", &queued)
	h.respond(3*time.Minute, "chat/turn-1", Response{CallID: "w1", Decision: results.DecisionApprove}, nil)
	// Same instant as the approval: the signal is in the workflow task
	// that ends the turn and must not be lost by the continue-as-new.
	h.signal(3*time.Minute, Send{Text: "signalled", By: "webhook"})
	next := h.continued(SessionInput{Turn: Input{Tools: []string{"write"}, User: "ada"}, TurnsPerRun: 1})

	require.Equal(t, Sent{TurnID: "chat/turn-2", Queued: true}, queued.sent)
	require.Equal(t, 1, next.TurnsPerRun)
	require.Equal(t, []string{"write"}, next.Turn.Tools, "settings are carried")
	require.Equal(t, "ada", next.Turn.User)
	require.Equal(t, h.turn("chat/turn-1").Head, next.Turn.Head)
	require.Empty(t, next.Turn.Messages)
	require.NotNil(t, next.Carried)
	require.Equal(t, 4, next.Carried.Next)
	require.Equal(t, 1, next.Carried.Runs)
	require.Len(t, next.Carried.Recent, 1)
	require.Equal(t, []string{"queued by update", "signalled"}, []string{next.Carried.Pending[0].Text, next.Carried.Pending[1].Text})

	// The next run: the two queued turns run at once, in order, then the
	// session ends.
	h2 := newSessionHarnessWith(t, model, store, Features{})
	var before Conversation
	h2.at(time.Second, func() { before = h2.conversation() })
	h2.end(time.Hour, End{}, nil)
	next.TurnsPerRun = 5
	res := h2.run(next)
	require.Equal(t, 1, before.Runs)
	require.Equal(t, 3, res.TurnsStarted)
	require.Len(t, res.Turns, 3)
	require.Equal(t, "Queued one answered.", res.Turns[1].Reply)
	require.Equal(t, "chat/turn-3", res.Turns[2].ID)
	require.Equal(t, "Signal answered.", res.Turns[2].Reply)
	require.Equal(t, []string{
		"user: write a.md", "assistant: Writing. call:w1", "tool: tool:w1", "assistant: Written.",
		"user: queued by update", "assistant: Queued one answered.",
		"user: signalled",
	}, texts(model.last()))
}

// A session's turns work in one workspace: each turn starts pinned where
// the turn before it ended (Result.Workspace), not on the worker that
// happens to start it, and a turn that re-pinned because that worker was
// gone takes the next turns with it. Continue-as-new carries the queue.
func TestSessionTurnsKeepTheirWorkspace(t *testing.T) {
	const (
		prev = "default-test-taskqueue/ws/prev"
		own  = "default-test-taskqueue/ws/own"
	)
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	model := &fakeModel{replies: []results.Message{
		calls("", tc("p1", "poke", `{"text":"one"}`)), results.AssistantText("One."),
		calls("", tc("p2", "poke", `{"text":"two"}`)), calls("", tc("p3", "poke", `{"text":"three"}`)), results.AssistantText("Two."),
		calls("", tc("p4", "poke", `{"text":"four"}`)), results.AssistantText("Three."),
	}}
	h := newSessionHarnessWith(t, model, store, Features{WorkspaceQueue: own})
	// p2 finds no worker on prev: the turn re-pins to own.
	h.env.OnActivity(activities.RunToolName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunToolInput) (results.Outcome, error) {
			if in.CallID == "p2" {
				return results.FailInternal("unused", "unused"), temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
			}
			return results.SucceedText("poked " + in.CallID), nil
		})
	h.send(time.Minute, "one", nil)
	h.send(2*time.Minute, "two", nil)
	h.send(3*time.Minute, "three", nil)
	next := h.continued(SessionInput{Turn: Input{Tools: []string{"poke"}, Workspace: prev}, TurnsPerRun: 3})

	require.Equal(t, []string{"p1@" + prev, "p2@" + prev, "p3@" + own, "p4@" + own}, h.tools)
	require.Equal(t, prev, h.turn("chat/turn-1").Workspace)
	require.Equal(t, own, h.turn("chat/turn-2").Workspace)
	require.Equal(t, own, h.turn("chat/turn-3").Workspace)
	require.Equal(t, own, next.Turn.Workspace, "the next run continues in the last turn's workspace")
}

// Temporal suggests continue-as-new while the session is idle, at the
// moment a send Update arrives: the Update is drained (it answers that
// its message is queued) and the message runs in the next run.
func TestSessionContinuesAsNewWithAnUpdateInFlight(t *testing.T) {
	h := newSessionHarness(t, results.AssistantText("One."))
	var first, inflight sendOutcome
	h.send(time.Minute, "one", &first)
	h.at(2*time.Minute, func() {
		// The suggestion comes while the handler runs, waiting for its
		// turn to start.
		h.updateThen(SendName, Send{Text: "two"}, &inflight, func() { h.env.SetContinueAsNewSuggested(true) })
	})
	next := h.continued(SessionInput{})

	require.NoError(t, inflight.rejected)
	require.True(t, inflight.done)
	require.NoError(t, inflight.err)
	require.Equal(t, Sent{TurnID: "chat/turn-2", Queued: true}, inflight.sent)
	require.Len(t, next.Carried.Pending, 1)
	require.Equal(t, "two", next.Carried.Pending[0].Text)
	require.Equal(t, "chat/turn-2", next.Carried.Pending[0].TurnID)
}

// end while the running turn waits for an approval cancels the turn,
// which answers its call (refused, never run), and the session ends; the
// queued message never runs.
func TestSessionEndWhileATurnWaitsForApproval(t *testing.T) {
	h := newSessionHarness(t, calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)))
	var ended, late sendOutcome
	h.send(time.Minute, "write a.md", nil)
	h.send(2*time.Minute, "queued", nil)
	h.end(3*time.Minute, End{By: "ada", Reason: "changed my mind"}, &ended)
	h.at(3*time.Minute, func() { h.update(SendName, Send{Text: "too late"}, &late) })
	res := h.run(SessionInput{Turn: Input{Tools: []string{"write"}}})

	require.NoError(t, ended.rejected)
	require.True(t, ended.done)
	require.Equal(t, SessionEnded, ended.conversation.Status)
	require.ErrorContains(t, late.rejected, "the session has ended")
	require.Equal(t, ErrTypeSessionClosed, late.rejectedKind)

	require.Equal(t, SessionEnded, res.Status)
	require.Equal(t, "changed my mind", res.EndReason)
	require.Len(t, res.Turns, 1)
	require.Equal(t, StatusCancelled, res.Turns[0].Status)
	require.Empty(t, h.log.all(), "the write never ran")
	turn := h.turn("chat/turn-1")
	require.Equal(t, StatusCancelled, turn.Status)
	require.Len(t, turn.Cards, 1)
	require.Equal(t, results.StateRefused, turn.Cards[0].State, "every call is answered")
	require.Len(t, res.Pending, 1)
	require.Equal(t, "queued", res.Pending[0].Text)
	// The cancelled turn's tool result is not stored; the session hands
	// it on so whoever continues the conversation sees the refusal.
	require.Equal(t, []string{"tool: tool:w1"}, texts(res.Messages))
}

// A turn that transfers ends the session with status transferred: the
// conversation belongs to the agent it names. Queued messages stay
// unanswered in the result, and the result says where the conversation
// stands so that agent can go on with it.
func TestSessionEndsWhenATurnTransfers(t *testing.T) {
	h := newSessionHarness(t,
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		calls("Handing over.", tc("h1", "handoff", `{"text":"billing"}`)))
	var rejected sendOutcome
	h.send(time.Minute, "refund me", nil)
	h.send(2*time.Minute, "queued before the transfer", nil)
	h.respond(3*time.Minute, "chat/turn-1", Response{CallID: "w1", Decision: results.DecisionApprove}, nil)
	res := h.run(SessionInput{Turn: Input{Tools: []string{"write", "handoff"}}})

	require.Equal(t, SessionTransferred, res.Status)
	require.NotNil(t, res.Transfer)
	require.Equal(t, "billing", res.Transfer.Target)
	require.Equal(t, StatusTransferred, res.Turns[0].Status)
	require.Equal(t, res.Transfer, res.Turns[0].Transfer)
	require.Len(t, res.Pending, 1)
	require.Equal(t, "queued before the transfer", res.Pending[0].Text)
	require.Equal(t, h.turn("chat/turn-1").Head, res.Head)
	require.Equal(t, []string{"tool: tool:h1"}, texts(res.Messages), "the handoff's tool result follows the stored head")
	_ = rejected
}

// A turn that stops at max_steps after its tools ran: the next turn
// continues from its head plus the tool results that were never sent, so
// every call the model made has its answer before the new message.
func TestSessionContinuesAfterMaxStepsWithTheToolResults(t *testing.T) {
	h := newSessionHarness(t,
		calls("Echoing.", tc("e1", "echo", `{"text":"ping"}`)),
		results.AssistantText("The echo said ping."))
	var firstRes SessionResult
	h.send(time.Minute, "echo ping", nil)
	h.send(2*time.Minute, "what did it say?", nil)
	h.end(3*time.Minute, End{}, nil)
	firstRes = h.run(SessionInput{Turn: Input{Tools: []string{"echo"}, MaxSteps: 1}})

	require.Equal(t, StatusMaxSteps, firstRes.Turns[0].Status)
	require.Equal(t, StatusCompleted, firstRes.Turns[1].Status)
	require.Equal(t, []string{
		"user: echo ping", "assistant: Echoing. call:e1", "tool: tool:e1",
		"user: what did it say?",
	}, texts(h.model.last()))
	require.Equal(t, []string{"tool: tool:e1", "user: what did it say?"}, texts(h.inputs[1].Messages),
		"the unsent tool result travels with the new message, the rest by head")
}

func TestSessionValidatesMessages(t *testing.T) {
	h := newSessionHarness(t, calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)))
	outcomes := map[string]*sendOutcome{}
	for _, c := range []struct {
		name string
		send Send
	}{
		{"empty", Send{Text: "  \n"}},
		{"long", Send{Text: strings.Repeat("x", MaxMessageBytes+1)}},
		{"bad by", Send{Text: "hi", By: strings.Repeat("b", 300)}},
	} {
		got := &sendOutcome{}
		outcomes[c.name] = got
		h.at(time.Minute, func() { h.update(SendName, c.send, got) })
	}
	h.send(2*time.Minute, "write a.md", nil)
	var full sendOutcome
	h.at(3*time.Minute, func() {
		for i := range MaxPending {
			h.update(SendName, Send{Text: fmt.Sprintf("queued %d", i)}, nil)
		}
		h.update(SendName, Send{Text: "one too many"}, &full)
		h.env.SignalWorkflow(SendName, Send{Text: "a signal too many"})
		h.env.SignalWorkflow(SendName, "not an object")
	})
	var c Conversation
	h.at(4*time.Minute, func() { c = h.conversation() })
	h.end(5*time.Minute, End{}, nil)
	var endAgain sendOutcome
	h.at(5*time.Minute, func() { h.update(EndName, End{}, &endAgain) })
	res := h.run(SessionInput{Turn: Input{Tools: []string{"write"}}})

	require.ErrorContains(t, outcomes["empty"].rejected, "the message is empty")
	require.ErrorContains(t, outcomes["long"].rejected, fmt.Sprintf("the message is %d bytes; it may be at most %d", MaxMessageBytes+1, MaxMessageBytes))
	require.ErrorContains(t, outcomes["bad by"].rejected, "by is 300 bytes")
	for _, o := range outcomes {
		require.Equal(t, ErrTypeInvalidMessage, o.rejectedKind)
	}
	require.ErrorContains(t, full.rejected, "16 messages already wait for their turn")
	require.Len(t, c.Pending, MaxPending)
	require.Equal(t, 2, c.InvalidSignals)
	require.Contains(t, c.LastInvalidSignal, "the payload is not a send object")
	require.ErrorContains(t, endAgain.rejected, "the session has already ended")
	require.Equal(t, 1, res.TurnsStarted, "rejected messages took no turn number")
	require.Equal(t, "chat/turn-2", res.Pending[0].TurnID)
}

func TestSessionRejectsInvalidInput(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   SessionInput
		want string
	}{
		{"prompt", SessionInput{Turn: Input{Prompt: "hi", Model: "fake:model"}}, "turn.prompt must be empty"},
		{"no model", SessionInput{Turn: Input{}}, "turn: the turn names no model"},
		{"turns per run", SessionInput{Turn: Input{Model: "m"}, TurnsPerRun: MaxTurnsPerRun + 1}, "turns_per_run is 1001"},
		{"head", SessionInput{Turn: Input{Model: "m", Head: "../x"}}, "head must be a transcript head"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newSessionHarness(t)
			h.env.ExecuteWorkflow(SessionWorkflowName, tt.in)
			err := h.env.GetWorkflowError()
			require.ErrorContains(t, err, tt.want)
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app))
			require.Equal(t, ErrTypeInvalidInput, app.Type())
		})
	}
}

// Fifty continues-as-new later, the session's carried state and its
// Query are as small as after a few, and it still answers a send at
// once with a turn that sees the whole conversation.
func TestSessionAfterFiftyContinuesAsNew(t *testing.T) {
	const runs = 50
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	var replies []results.Message
	for i := 1; i <= runs+1; i++ {
		replies = append(replies, results.AssistantText(fmt.Sprintf("reply %d", i)))
	}
	model := &fakeModel{replies: replies}
	in := SessionInput{TurnsPerRun: 1}
	var sizes []int
	for i := 1; i <= runs; i++ {
		h := newSessionHarnessWith(t, model, store, Features{})
		h.send(time.Minute, fmt.Sprintf("message %d", i), nil)
		in = h.continued(in)
		b, err := json.Marshal(in)
		require.NoError(t, err)
		sizes = append(sizes, len(b))
	}
	require.Equal(t, runs, in.Carried.Runs)
	require.Len(t, in.Carried.Recent, RecentTurns)
	require.Equal(t, runs-RecentTurns, in.Carried.Earlier.Total)
	require.Equal(t, map[Status]int{StatusCompleted: runs - RecentTurns}, in.Carried.Earlier.ByStatus)
	// Bounded: the carried state stops growing once the recent turns are
	// full (turn numbers gain a digit at most).
	require.InDelta(t, sizes[RecentTurns+5], sizes[runs-1], 64, "carried input sizes %v", sizes)

	h := newSessionHarnessWith(t, model, store, Features{})
	var c Conversation
	var sent sendOutcome
	h.at(time.Second, func() { c = h.conversation() })
	h.send(time.Minute, "message 51", &sent)
	h.end(2*time.Minute, End{}, nil)
	in.TurnsPerRun = 2
	res := h.run(in)
	require.Equal(t, runs, c.Runs)
	require.Len(t, c.Turns, RecentTurns)
	require.Equal(t, "chat/turn-50", c.Turns[RecentTurns-1].ID)
	require.Equal(t, Sent{TurnID: "chat/turn-51"}, sent.sent)
	require.Equal(t, "reply 51", res.Turns[RecentTurns-1].Reply)
	all := texts(model.last())
	require.Len(t, all, 2*runs+1, "the 51st turn saw every earlier message")
	require.Equal(t, "user: message 1", all[0])
	require.Equal(t, "assistant: reply 50", all[2*runs-1])
}

// With search attributes offered, each turn starts with TollgateSession
// and TollgateUser set, so `TollgateSession="<id>"` lists a session's
// turns.
func TestSessionTurnsCarrySearchAttributes(t *testing.T) {
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	h := newSessionHarnessWith(t, &fakeModel{}, store, Features{SearchAttributes: true})
	h.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in Input) (Result, error) {
		sa := workflow.GetTypedSearchAttributes(ctx)
		session, _ := sa.GetKeyword(SessionAttr)
		user, _ := sa.GetKeyword(UserAttr)
		return Result{Status: StatusCompleted, Text: session + "|" + user}, nil
	}, workflow.RegisterOptions{Name: WorkflowName, DisableAlreadyRegisteredCheck: true})
	h.send(time.Minute, "hi", nil)
	h.end(2*time.Minute, End{}, nil)
	res := h.run(SessionInput{Turn: Input{User: "ada"}})
	require.Equal(t, "chat|ada", res.Turns[0].Reply)
}

func TestContinuation(t *testing.T) {
	const h0, h1 = "h0", "h1"
	user, ask := results.UserText("q"), calls("", tc("c1", "echo", `{}`))
	tool := results.Message{Role: results.RoleTool, ToolCallID: "c1", Parts: []results.Part{results.TextPart("r")}}
	carried := results.UserText("earlier, unsent")
	for _, tt := range []struct {
		name     string
		in       Input
		res      Result
		head     string
		unstored []results.Message
	}{
		{"completed", Input{Head: h0}, Result{Head: h1, Messages: []results.Message{user, results.AssistantText("a")}}, h1, nil},
		{"stopped after tool results", Input{Head: h0}, Result{Head: h1, Messages: []results.Message{user, ask, tool}}, h1, []results.Message{tool}},
		{"no reply at all", Input{Head: h0, Messages: []results.Message{carried}}, Result{Head: h0, Messages: []results.Message{user}}, h0, []results.Message{carried, user}},
		{"nothing stored", Input{Messages: []results.Message{carried}}, Result{Messages: []results.Message{user, results.AssistantText("a")}}, "", []results.Message{carried, user, results.AssistantText("a")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			head, unstored := continuation(tt.in, tt.res)
			require.Equal(t, tt.head, head)
			require.Equal(t, tt.unstored, unstored)
		})
	}
}

// A turn that continues a stored conversation the store does not have
// fails and says so: it cannot resend what it never held.
func TestTurnFromAMissingHeadFails(t *testing.T) {
	h := newHarness(t, results.AssistantText("never"))
	res := h.run(t, Input{Prompt: "go on", Head: strings.Repeat("ab", 32)})
	require.Equal(t, StatusFailed, res.Status)
	require.Contains(t, res.Error, "the stored conversation this turn continues is missing")
	require.Empty(t, h.model.requests, "the model never answered without the history")
	require.Equal(t, strings.Repeat("ab", 32), res.Head)
}

func TestTurnWithAMalformedHeadIsInvalid(t *testing.T) {
	h := newHarness(t)
	h.env.ExecuteWorkflow(WorkflowName, Input{Prompt: "go on", Model: "fake:model", Head: "not-a-head"})
	require.ErrorContains(t, h.env.GetWorkflowError(), "invalid turn input: head must be a transcript head")
}

// When the worker cannot store the reply of a turn that continues a
// stored conversation, the turn fails without keeping the reply: its
// head and unsent messages still describe the conversation exactly.
func TestTurnFromAHeadFailsWhenTheReplyCannotBeStored(t *testing.T) {
	h := newHarness(t)
	h.env.OnActivity(activities.CallModelName, mock.Anything, mock.Anything).Return(activities.CallModelResult{
		Transcript: "", Response: model.Response{Message: results.AssistantText("unstored")},
	}, nil)
	start := strings.Repeat("cd", 32)
	res := h.run(t, Input{Prompt: "go on", Head: start})
	require.Equal(t, StatusFailed, res.Status)
	require.Contains(t, res.Error, "could not store the conversation")
	require.Equal(t, start, res.Head)
	require.Equal(t, []string{"user: go on"}, texts(res.Messages))
}

// A send retried under its Update id after the session continued as new
// (the first answer was lost: a client timeout, a restarting server)
// reaches a run the server never gave that id: it is the same message,
// answered with the turn the first one got, and adds no turn.
func TestSessionSendRetriedInTheNextRunIsTheSameMessage(t *testing.T) {
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	model := &fakeModel{replies: []results.Message{results.AssistantText("one"), results.AssistantText("two")}}
	h := newSessionHarnessWith(t, model, store, Features{})
	var first sendOutcome
	h.sendAs(time.Minute, "m1", "first", &first)
	next := h.continued(SessionInput{TurnsPerRun: 1})
	require.Equal(t, "chat/turn-1", first.sent.TurnID)
	require.Equal(t, []SentUpdate{{UpdateID: "m1", TurnID: "chat/turn-1"}}, next.Carried.Sends)

	h = newSessionHarnessWith(t, model, store, Features{})
	var again, second sendOutcome
	h.sendAs(time.Minute, "m1", "first", &again)
	h.sendAs(2*time.Minute, "m2", "second", &second)
	last := h.continued(next)
	require.NoError(t, again.rejected)
	require.Equal(t, Sent{TurnID: "chat/turn-1"}, again.sent, "the retry is the first message")
	require.Equal(t, "chat/turn-2", second.sent.TurnID, "the next message is the next turn")
	require.Equal(t, 3, last.Carried.Next, "two messages, two turns")
	require.Equal(t, "two", last.Carried.Recent[1].Reply)
	require.Equal(t, []SentUpdate{{UpdateID: "m1", TurnID: "chat/turn-1"}, {UpdateID: "m2", TurnID: "chat/turn-2"}}, last.Carried.Sends)
}
