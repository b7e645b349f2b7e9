package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/devserver"
	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/replay"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// sessionCorpusDir holds the recorded AgentSession histories: they replay
// with AgentSession and AgentTurn registered (workflows' session replay
// test), so they live apart from the AgentTurn corpus.
const sessionCorpusDir = corpusDir + "/sessions"

// sessions is the public client on this path's caller and task queue.
func (e *env) sessions() tollgate.Client {
	return tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}
}

// startSession starts an AgentSession from the starter's client.
func (e *env) startSession(in workflows.SessionInput) client.WorkflowRun {
	e.t.Helper()
	return e.startWorkflow(workflows.SessionWorkflowName, in)
}

// send adds a message as a caller that must not lose it does: the same
// Update id on every attempt, again after anything but a refusal (no
// worker, a server restarting).
func (e *env) send(sessionID, updateID, text string) workflows.Sent {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		sent, err := e.sessions().SendOnce(ctx, sessionID, updateID, workflows.Send{Text: text, By: "ada"})
		cancel()
		var rejected *tollgate.RejectedError
		if err == nil || errors.As(err, &rejected) || time.Now().After(deadline) {
			require.NoError(e.t, err, "send %q to %s", text, sessionID)
			return sent
		}
		time.Sleep(pollEvery)
	}
}

// conversation polls Client.Conversation until cond holds.
func (e *env) conversation(sessionID, what string, cond func(workflows.Conversation) bool) workflows.Conversation {
	e.t.Helper()
	var last workflows.Conversation
	var lastErr error
	ok := eventually(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := e.sessions().Conversation(ctx, sessionID)
		if err != nil {
			lastErr = err
			return false
		}
		last, lastErr = c, nil
		return cond(c)
	})
	require.True(e.t, ok, "waited %s for %s; last conversation %+v, last error %v", waitTimeout, what, last, lastErr)
	return last
}

// turnResult waits for a session's turn to end, whether it has started
// yet or not, and across worker and server restarts.
func (e *env) turnResult(turnID string) workflows.Result {
	e.t.Helper()
	return awaitResult[workflows.Result](e, "turn", turnID)
}

// awaitResult waits for the latest run of workflow id to end and decodes
// its result; a workflow that failed fails the test at once.
func awaitResult[T any](e *env, what, id string) T {
	e.t.Helper()
	deadline := time.Now().Add(resultTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var res T
		err := e.caller.GetWorkflow(ctx, id, "").Get(ctx, &res)
		cancel()
		if err == nil {
			return res
		}
		var failed *temporal.WorkflowExecutionError
		if errors.As(err, &failed) || time.Now().After(deadline) {
			require.NoError(e.t, err, "%s %s did not end within %s", what, id, resultTimeout)
		}
		time.Sleep(pollEvery)
	}
}

// rawConversation asks the conversation Query once, without the running
// turn's state.
func rawConversation(c client.Client, sessionID string) (workflows.Conversation, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(ctx, sessionID, "", workflows.ConversationQuery)
	if err != nil {
		return workflows.Conversation{}, err
	}
	var conv workflows.Conversation
	err = v.Get(&conv)
	return conv, err
}

// sessionResult waits for the session's latest run to end.
func (e *env) sessionResult(sessionID string) workflows.SessionResult {
	e.t.Helper()
	return awaitResult[workflows.SessionResult](e, "session", sessionID)
}

func (e *env) end(sessionID string, end workflows.End) workflows.Conversation {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := e.sessions().End(ctx, sessionID, end)
	require.NoError(e.t, err)
	return c
}

// recordTo writes one run's history to dir/<name>.json when -record is
// set, as record does for the turn corpus.
func (e *env) recordTo(dir, name, workflowID, runID string) {
	e.t.Helper()
	if !*record {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var buf bytes.Buffer
	require.NoError(e.t, replay.Export(ctx, e.caller, workflowID, runID, &buf))
	out := buf.Bytes()
	require.NotContains(e.t, string(out), "externalPayloads", "a corpus history must not refer to externally stored payloads")
	if host, err := os.Hostname(); err == nil && host != "" {
		out = bytes.ReplaceAll(out, []byte(`"name": "`+host+`:`), []byte(`"name": "recorder:`))
	}
	require.NoError(e.t, os.MkdirAll(dir, 0o755))
	require.NoError(e.t, os.WriteFile(filepath.Join(dir, name+".json"), out, 0o644))
}

// runIDs follows a session's continue-as-new chain from its first run and
// returns every run id, oldest first, with each run's event count and
// encoded size.
func (e *env) sessionRuns(workflowID, firstRunID string) (runIDs []string, events, sizes []int) {
	e.t.Helper()
	for runID := firstRunID; runID != ""; {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		it := e.caller.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		n, size, next := 0, 0, ""
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(e.t, err)
			n++
			size += proto.Size(ev)
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		cancel()
		runIDs, events, sizes = append(runIDs, runID), append(events, n), append(sizes, size)
		runID = next
	}
	return runIDs, events, sizes
}

// A session of three turns on a real server: the first waits for an
// approval, which Client.Conversation shows under the session id; a
// message sent meanwhile queues; once approved, the queued turn runs and
// sees the conversation so far (by transcript head), and end closes the
// session. The session's history and its second turn's (a turn that
// continues a stored conversation) go to the corpus.
func TestSessionTurnsQueueAndContinueTheConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "session_turns")
	model := e.script(
		reply("I'll write it.", call("w1", "write_file", map[string]string{"path": "a.md", "content": "hello"})),
		expecting(reply("Written a.md."), 1, "created a.md"),
		expecting(reply("I wrote a.md, which says hello."), 0, "What did you write?"),
	)
	e.startWorker()
	run := e.startSession(workflows.SessionInput{Turn: workflows.Input{Model: model, Tools: []string{"write_file"}, User: "ada"}})
	id := run.GetID()

	first := e.send(id, "u1", "Write a.md")
	require.Equal(t, workflows.Sent{TurnID: id + "/turn-1"}, first)
	waiting := e.conversation(id, "turn-1 waiting for w1", func(c workflows.Conversation) bool {
		return c.Running == first.TurnID && len(c.Turns) == 1 && len(c.Turns[0].Waiting) == 1
	})
	require.Equal(t, workflows.StatusWaiting, waiting.Turns[0].Status)
	require.Equal(t, "w1", waiting.Turns[0].Waiting[0].CallID)
	require.Equal(t, results.StatePendingApproval, waiting.Turns[0].Waiting[0].State)

	second := e.send(id, "u2", "What did you write?")
	require.Equal(t, workflows.Sent{TurnID: id + "/turn-2", Queued: true}, second)
	// The same Update id again is the same message, not a second one.
	require.Equal(t, second, e.send(id, "u2", "What did you write?"))
	queued := e.conversation(id, "one message pending", func(c workflows.Conversation) bool { return len(c.Pending) == 1 })
	require.Equal(t, "What did you write?", queued.Pending[0].Text)

	turn1 := e.caller.GetWorkflow(context.Background(), first.TurnID, "")
	_, err := respond(e.dial("e2e-approver"), turn1, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "ada"})
	require.NoError(t, err)
	require.Equal(t, "Written a.md.", e.turnResult(first.TurnID).Text)
	res2 := e.turnResult(second.TurnID)
	require.Equal(t, workflows.StatusCompleted, res2.Status)
	require.Equal(t, "I wrote a.md, which says hello.", res2.Text)
	require.NotEmpty(t, res2.Head)

	done := e.end(id, workflows.End{By: "ada", Reason: "thanks"})
	require.Equal(t, workflows.SessionEnded, done.Status)
	res := e.sessionResult(id)
	require.Equal(t, workflows.SessionEnded, res.Status)
	require.Len(t, res.Turns, 2)
	require.Equal(t, res2.Head, res.Head)
	require.Empty(t, res.Messages)

	e.recordTo(sessionCorpusDir, "session_turns", id, run.GetRunID())
	e.recordTo(corpusDir, "session_turn_continued", second.TurnID, "")
}

// end while a turn waits for an approval cancels the turn, which refuses
// its waiting call; the session ends with status ended.
func TestSessionEndWhileATurnWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "session_end_while_waiting")
	model := e.script(reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "x"})))
	e.startWorker()
	run := e.startSession(workflows.SessionInput{Turn: workflows.Input{Model: model, Tools: []string{"write_file"}}})
	id := run.GetID()
	sent := e.send(id, "u1", "Write a.md")
	e.conversation(id, "the turn waiting", func(c workflows.Conversation) bool {
		return len(c.Turns) == 1 && len(c.Turns[0].Waiting) == 1
	})

	done := e.end(id, workflows.End{By: "ada", Reason: "never mind"})
	require.Equal(t, workflows.SessionEnded, done.Status)
	require.Equal(t, workflows.StatusCancelled, done.Turns[0].Status)
	turn := e.turnResult(sent.TurnID)
	require.Equal(t, workflows.StatusCancelled, turn.Status)
	require.Equal(t, results.StateRefused, mustCard(t, turn.Cards, "w1").State)
	require.NoFileExists(t, filepath.Join(e.ws, "a.md"))

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := e.sessions().Send(ctx, id, workflows.Send{Text: "hello?"})
	var rejected *tollgate.RejectedError
	require.True(t, errors.As(err, &rejected), "%v", err)
	require.Equal(t, workflows.ErrTypeSessionClosed, rejected.Type)
	e.recordTo(sessionCorpusDir, "session_end_while_waiting", id, run.GetRunID())
}

// A turn that hands the conversation to another agent ends the session
// with status transferred; the result says where the conversation stands.
func TestSessionEndsOnTransfer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "session_transfer")
	model := e.script(
		expecting(reply("Hi."), 0, "hello"),
		reply("Billing will take it from here.", call("h1", "handoff", map[string]string{"target": "billing", "message": "refund question"})),
	)
	e.startWorker()
	run := e.startSession(workflows.SessionInput{Turn: workflows.Input{Model: model, Tools: []string{"handoff"}}})
	id := run.GetID()
	e.turnResult(e.send(id, "u1", "hello").TurnID)
	e.send(id, "u2", "I want a refund")
	res := e.sessionResult(id)
	require.Equal(t, workflows.SessionTransferred, res.Status)
	require.Equal(t, "billing", res.Transfer.Target)
	require.Equal(t, workflows.StatusTransferred, res.Turns[1].Status)
	require.NotEmpty(t, res.Head)
	require.Len(t, res.Messages, 1, "the handoff's tool result follows the head")
	require.Equal(t, results.RoleTool, res.Messages[0].Role)
	e.recordTo(sessionCorpusDir, "session_transfer", id, run.GetRunID())
}

// A session of one turn per run continues as new after each turn; a
// message sent to the workflow id reaches the newest run, which goes on
// with the conversation.
func TestSessionContinuesAsNewBetweenTurns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "session_continue_as_new")
	model := e.script(
		expecting(reply("One."), 0, "first"),
		expecting(reply("Two."), 0, "second"),
	)
	e.startWorker()
	run := e.startSession(workflows.SessionInput{Turn: workflows.Input{Model: model, Tools: []string{"read_file"}}, TurnsPerRun: 1})
	id := run.GetID()
	require.Equal(t, "One.", e.turnResult(e.send(id, "u1", "first").TurnID).Text)
	e.conversation(id, "the second run", func(c workflows.Conversation) bool { return c.Runs == 1 })
	require.Equal(t, "Two.", e.turnResult(e.send(id, "u2", "second").TurnID).Text)
	e.conversation(id, "the third run", func(c workflows.Conversation) bool { return c.Runs == 2 })
	done := e.end(id, workflows.End{})
	require.Equal(t, 2, done.Runs)
	require.Len(t, done.Turns, 2, "the turns of earlier runs are carried")

	runIDs, _, _ := e.sessionRuns(id, run.GetRunID())
	require.Len(t, runIDs, 3)
	e.recordTo(sessionCorpusDir, "session_continue_as_new_first_run", id, runIDs[0])
	e.recordTo(sessionCorpusDir, "session_continue_as_new_last_run", id, runIDs[2])
}

// The server keeps one Update per id only within a run: a send whose
// answer was lost and that is retried under its id after the session
// continued as new (as TestSessionSurvivesAServerRestart's sends are,
// across the restart) reaches a run that never saw the id. It is the same
// message: it answers with the first turn and adds none.
func TestSessionSendRetriedAfterContinueAsNewIsAddedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "session_send_retried")
	model := e.script(
		expecting(reply("One."), 0, "first"),
		expecting(reply("Two."), 0, "second"),
	)
	e.startWorker()
	run := e.startSession(workflows.SessionInput{Turn: workflows.Input{Model: model}, TurnsPerRun: 1})
	id := run.GetID()
	first := e.send(id, "u1", "first")
	require.Equal(t, id+"/turn-1", first.TurnID)
	require.Equal(t, "One.", e.turnResult(first.TurnID).Text)
	e.conversation(id, "the second run", func(c workflows.Conversation) bool { return c.Runs == 1 && c.Running == "" })

	again := e.send(id, "u1", "first")
	require.Equal(t, workflows.Sent{TurnID: first.TurnID}, again, "the retried send is the first message, not a new one")
	second := e.send(id, "u2", "second")
	require.Equal(t, id+"/turn-2", second.TurnID)
	require.Equal(t, "Two.", e.turnResult(second.TurnID).Text)
	e.conversation(id, "the third run", func(c workflows.Conversation) bool { return c.Runs == 2 })
	done := e.end(id, workflows.End{})
	require.Equal(t, 2, done.TurnsStarted)

	runIDs, _, _ := e.sessionRuns(id, run.GetRunID())
	require.Len(t, runIDs, 3)
	e.recordTo(sessionCorpusDir, "session_send_retried", id, runIDs[1])
}

// longSessionWindow is how many messages the long sessions keep waiting
// ahead of the running turn, so turns run back to back (below
// workflows.MaxPending).
const longSessionWindow = 8

// A session of 300 turns with the scripted model continues as new every
// 100 turns, and its worker is stopped and replaced mid-session, while a
// turn runs and messages wait. Every reply arrives, in order, and the
// scripted model (which picks its reply by the number of replies already
// in the conversation and checks that it answers message k) proves that
// every turn saw the whole conversation.
func TestSessionOf300TurnsContinuesAsNewAcrossAWorkerRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "session_long")
	e.taskTimeout = stoppedWorkerTaskTimeout
	w := e.startWorker()
	chat(t, e, 300, 100, map[int]func(){
		120: func() {
			e.stopWorker(w)
			w = e.startWorker()
		},
	})
}

// The embedded dev server (SQLite in a file) stops and starts again in
// the middle of a session, with a turn in flight and messages waiting;
// the session goes on where it was, continuing as new before and after.
func TestSessionSurvivesAServerRestart(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "temporal.db")
	port, err := devserver.FreePort()
	require.NoError(t, err)
	srv := startDevServer(t, db, port)
	e := newEnvAt(t, "session_server_restart", srv.Address(), "default")
	e.taskTimeout = stoppedWorkerTaskTimeout
	w := e.startWorker()
	chat(t, e, 40, 10, map[int]func(){
		25: func() {
			e.stopWorker(w)
			srv.stop(t)
			srv = startDevServer(t, db, port)
			// Workers and clients go before this server does.
			t.Cleanup(e.stopAll)
			e.caller = e.dial("e2e-starter-after-restart")
			w = e.startWorker()
		},
	})
}

// chat runs a session of the given number of turns, perRun turns a run,
// calling at[k] right after message k is sent, and checks every reply and
// the session's runs.
func chat(t *testing.T, e *env, turns, perRun int, at map[int]func()) {
	t.Helper()
	began := time.Now()
	var replies []scripted.Reply
	for k := 1; k <= turns; k++ {
		replies = append(replies, expecting(reply(fmt.Sprintf("reply %d", k)), 0, fmt.Sprintf("message #%d.", k)))
	}
	model := e.script(replies...)
	run := e.startSession(workflows.SessionInput{Turn: workflows.Input{Model: model}, TurnsPerRun: perRun})
	id := run.GetID()

	// pending is how many messages may still wait, as far as the test
	// knows: it asks the session only when that reaches the window, so
	// the queries do not load the worker more than the turns do.
	pending := 0
	for k := 1; k <= turns; k++ {
		if pending >= longSessionWindow {
			ok := eventually(func() bool {
				c, err := rawConversation(e.caller, id)
				pending = len(c.Pending)
				return err == nil && pending < longSessionWindow/2
			})
			require.True(t, ok, "the session's queue did not drain within %s", waitTimeout)
		}
		pending++
		sent := e.send(id, fmt.Sprintf("m%d", k), fmt.Sprintf("message #%d.", k))
		require.Equal(t, fmt.Sprintf("%s/turn-%d", id, k), sent.TurnID)
		if f := at[k]; f != nil {
			f()
		}
	}
	// Continue-as-new follows the last turn in the same workflow task,
	// but a query may be answered just before: wait for the last run.
	wantRuns := turns / perRun
	var conv workflows.Conversation
	ok := eventually(func() bool {
		var err error
		conv, err = rawConversation(e.caller, id)
		return err == nil && conv.TurnsStarted == turns && conv.Running == "" && conv.Runs == wantRuns
	})
	require.True(t, ok, "the session did not run %d turns in %d runs; conversation %+v", turns, wantRuns+1, conv)
	for k := 1; k <= turns; k++ {
		res := e.turnResult(fmt.Sprintf("%s/turn-%d", id, k))
		require.Equal(t, workflows.StatusCompleted, res.Status, "turn %d: %s", k, res.Error)
		require.Equal(t, fmt.Sprintf("reply %d", k), res.Text, "turn %d", k)
	}
	require.Len(t, conv.Turns, workflows.RecentTurns)
	require.Equal(t, fmt.Sprintf("reply %d", turns), conv.Turns[len(conv.Turns)-1].Reply)
	require.Equal(t, turns-workflows.RecentTurns, conv.Earlier.Total)
	require.Equal(t, turns-workflows.RecentTurns, conv.Earlier.ByStatus[workflows.StatusCompleted])
	took := time.Since(began)
	e.end(id, workflows.End{})

	runIDs, events, sizes := e.sessionRuns(id, run.GetRunID())
	require.Len(t, runIDs, wantRuns+1)
	maxEvents, maxBytes := 0, 0
	for i := range runIDs {
		maxEvents, maxBytes = max(maxEvents, events[i]), max(maxBytes, sizes[i])
	}
	t.Logf("session of %d turns: %d continues-as-new; events per run %v, bytes per run %v (largest run %d events, %d bytes); %s",
		turns, len(runIDs)-1, events, sizes, maxEvents, maxBytes, took.Round(100*time.Millisecond))
}
