package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Benchmark 9: sessions. A session is an AgentSession workflow whose
// turns are child AgentTurns; these measure what a session adds to a
// turn and whether it stays flat over many turns and continues-as-new.

// Sessions is benchmark 9.
type Sessions struct {
	// Turns turns ran in one session, PerRun a run (9a).
	Turns, PerRun int
	// Runs are the session's runs, oldest first; the last one holds only
	// the end.
	Runs []SessionRun
	// First and Last are the mean history of the child turns of the
	// first and of the last PerRun turns.
	First, Last TurnHistory
	// Send and BareSend are 9b: send Update sent → the turn's first
	// activity starts (Tollgate: CallModel; bare: a no-op), one sample
	// at a time.
	Send, BareSend []time.Duration
	// Idle is 9c: the worker's memory with idle sessions (Tollgate, each
	// after one turn) and with bare workflows waiting for an update.
	Idle [2]*Parked
}

// SessionRun is one run of a session's history.
type SessionRun struct {
	Turns, Events int
	Bytes         int64
}

// TurnHistory is the mean history of a set of turns.
type TurnHistory struct {
	Events, Bytes float64
}

// SessionConfig sizes benchmark 9.
type SessionConfig struct {
	// Turns of the long session, PerRun a run; Samples of 9b a side;
	// Idle sessions (and bare workflows) of 9c, on a worker with a sticky
	// cache of Cache.
	Turns, PerRun, Samples, Idle, Cache int
}

// Sessions runs benchmark 9.
func (e *Env) Sessions(ctx context.Context, cfg SessionConfig) (*Sessions, error) {
	s := &Sessions{Turns: cfg.Turns, PerRun: cfg.PerRun}
	var err error
	if err = e.sessionHistory(ctx, s); err != nil {
		return nil, fmt.Errorf("session history: %w", err)
	}
	if s.Send, s.BareSend, err = e.sessionSends(ctx, cfg.Samples); err != nil {
		return nil, fmt.Errorf("session send: %w", err)
	}
	var cps []int
	for _, c := range []int{cfg.Cache, 2 * cfg.Cache, cfg.Idle} {
		if c > 0 && c <= cfg.Idle && (len(cps) == 0 || c > cps[len(cps)-1]) {
			cps = append(cps, c)
		}
	}
	for i, side := range []string{sideTollgate, sideBare} {
		if s.Idle[i], err = e.idle(ctx, side, cfg.Idle, cfg.Cache, cps); err != nil {
			return nil, fmt.Errorf("idle %s: %w", side, err)
		}
	}
	return s, nil
}

// sessionScript is a scripted model that answers turns turns with text.
func (e *Env) sessionScript(turns int) (string, error) {
	s := scripted.Script{}
	for k := 1; k <= turns; k++ {
		s.Replies = append(s.Replies, scripted.Reply{Text: fmt.Sprintf("reply %d", k)})
	}
	data, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(e.DataDir, "scripts")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := fmt.Sprintf("session-%d.json", turns)
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		return "", err
	}
	if _, err := scripted.Open(name, dir); err != nil {
		return "", err
	}
	return "scripted:" + name, nil
}

func turnOf(sessionID string, k int) string { return fmt.Sprintf("%s/turn-%d", sessionID, k) }

// message is the k-th message of a session. It names the session: the
// transcript store is content-addressed, and sessions that all said the
// same would share their chunks and skip the writes real ones pay.
func message(sessionID string, k int) workflows.Send {
	return workflows.Send{Text: fmt.Sprintf("message %d of %s", k, sessionID), By: "bench"}
}

func (e *Env) startSession(ctx context.Context, sid, queue, model string, perRun int) (client.WorkflowRun, error) {
	return e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: sid, TaskQueue: queue}, workflows.SessionWorkflowName,
		workflows.SessionInput{Turn: workflows.Input{Model: model}, TurnsPerRun: perRun})
}

// chatTurn sends message k and waits for its turn to complete, as a
// person at a chat does.
func (e *Env) chatTurn(ctx context.Context, sid string, k int) error {
	tid := turnOf(sid, k)
	done := e.Stamps.Arm(DoneKey(tid))
	defer e.Stamps.Disarm(DoneKey(tid))
	h, err := e.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: sid, UpdateName: workflows.SendName, Args: []any{message(sid, k)}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	var sent workflows.Sent
	if err := h.Get(ctx, &sent); err != nil {
		return err
	}
	if sent.TurnID != tid {
		return fmt.Errorf("message %d of %s became turn %s", k, sid, sent.TurnID)
	}
	var res workflows.Result
	if err := e.Wait(ctx, tid, done, &res); err != nil {
		return err
	}
	if res.Status != workflows.StatusCompleted {
		return fmt.Errorf("turn %s ended %s: %s", tid, res.Status, res.Error)
	}
	return nil
}

func (e *Env) endSession(ctx context.Context, sid string) error {
	h, err := e.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: sid, UpdateName: workflows.EndName, Args: []any{workflows.End{By: "bench"}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, nil)
}

// sessionHistory is 9a: one session of s.Turns turns, one at a time; the
// history of each of its runs, and of its turns.
func (e *Env) sessionHistory(ctx context.Context, s *Sessions) error {
	model, err := e.sessionScript(s.Turns)
	if err != nil {
		return err
	}
	sid := id("session-history")
	run, err := e.startSession(ctx, sid, TollgateQueue, model, s.PerRun)
	if err != nil {
		return err
	}
	for k := 1; k <= s.Turns; k++ {
		if err := e.chatTurn(ctx, sid, k); err != nil {
			return err
		}
	}
	// An end that reaches the session with the last turn's completion
	// wins over the continue-as-new due then; wait for it, so every run
	// is measured the same.
	runs := s.Turns / s.PerRun
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := e.Client.QueryWorkflow(ctx, sid, "", workflows.ConversationQuery)
		var c workflows.Conversation
		if err == nil {
			err = v.Get(&c)
		}
		if err != nil {
			return err
		}
		if c.Running == "" && c.Runs == runs {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("session %s did not continue as new %d times within 30s (%d)", sid, runs, c.Runs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := e.endSession(ctx, sid); err != nil {
		return err
	}
	for runID, left := run.GetRunID(), s.Turns; runID != ""; {
		r := SessionRun{Turns: min(left, s.PerRun)}
		left -= r.Turns
		if runID, err = e.runHistory(ctx, sid, runID, &r); err != nil {
			return err
		}
		s.Runs = append(s.Runs, r)
	}
	mean := func(from, to int) (TurnHistory, error) {
		var h TurnHistory
		for k := from; k <= to; k++ {
			events, size, _, err := e.historySize(ctx, turnOf(sid, k))
			if err != nil {
				return h, err
			}
			h.Events += float64(events)
			h.Bytes += float64(size)
		}
		n := float64(to - from + 1)
		h.Events, h.Bytes = h.Events/n, h.Bytes/n
		return h, nil
	}
	if s.First, err = mean(1, s.PerRun); err != nil {
		return err
	}
	s.Last, err = mean(s.Turns-s.PerRun+1, s.Turns)
	return err
}

// runHistory sums one run's events and their encoded size, and returns
// the run it continued as, if any.
func (e *Env) runHistory(ctx context.Context, wid, runID string, r *SessionRun) (next string, err error) {
	it := e.Client.GetWorkflowHistory(ctx, wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", err
		}
		r.Events++
		r.Bytes += int64(proto.Size(ev))
		if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			next = a.GetNewExecutionRunId()
		}
	}
	if r.Events == 0 {
		return "", errors.New("empty history")
	}
	return next, nil
}

// The bare session of 9b: a workflow that takes a message by Update,
// queues it and runs it as a child workflow of one activity, one at a
// time, answering the Update once the child has started.
const (
	BareSessionName     = "BareSession"
	BareSessionTurnName = "BareSessionTurn"
	bareSessionQueue    = "bench-bare-session"
	bareSend            = "send"
	bareSessionIdle     = "idle"
	bareSessionNoMore   = "end"
)

// BareSession is the bare side of 9b.
func BareSession(ctx workflow.Context) error {
	var queue []string
	next, started, running, ended := 1, 0, false, false
	wid := workflow.GetInfo(ctx).WorkflowExecution.ID
	if err := workflow.SetQueryHandler(ctx, bareSessionIdle, func() (bool, error) { return !running && len(queue) == 0, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, bareSend, func(ctx workflow.Context, text string) (string, error) {
		n := next
		next++
		queue = append(queue, text)
		err := workflow.Await(ctx, func() bool { return started >= n })
		return turnOf(wid, n), err
	}, workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, text string) error {
		if text == "" {
			return errors.New("empty message")
		}
		return nil
	}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, bareSessionNoMore, func(workflow.Context) error { ended = true; return nil }); err != nil {
		return err
	}
	for n := 1; ; n++ {
		if err := workflow.Await(ctx, func() bool { return ended || len(queue) > 0 }); err != nil {
			return err
		}
		if ended {
			return workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
		}
		text := queue[0]
		queue = queue[1:]
		running = true
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: turnOf(wid, n)})
		child := workflow.ExecuteChildWorkflow(cctx, BareSessionTurnName, text)
		if err := child.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			return err
		}
		started = n
		if err := child.Get(ctx, nil); err != nil {
			return err
		}
		running = false
	}
}

// BareSessionTurn runs one no-op "model" activity.
func BareSessionTurn(ctx workflow.Context, text string) (string, error) {
	var out string
	err := workflow.ExecuteActivity(bareCtx(ctx), bareModel, 0).Get(ctx, &out)
	return out, err
}

// sessionSends is 9b: samples messages a side, one at a time, each from
// the send Update leaving the client to its turn's first activity
// starting (the worker's stamp), alternating which side goes first.
// Each turn completes, and its session takes the completion in, before
// the next sample.
func (e *Env) sessionSends(ctx context.Context, samples int) (tollgate, bare []time.Duration, err error) {
	bw := worker.New(e.Client, bareSessionQueue, WorkerOptions(e.Stamps))
	bw.RegisterWorkflowWithOptions(BareSession, workflow.RegisterOptions{Name: BareSessionName})
	bw.RegisterWorkflowWithOptions(BareSessionTurn, workflow.RegisterOptions{Name: BareSessionTurnName})
	bw.RegisterActivityWithOptions(bareNoopActivity, activity.RegisterOptions{Name: bareModel})
	if err := bw.Start(); err != nil {
		return nil, nil, err
	}
	defer bw.Stop()

	model, err := e.sessionScript(samples + 1)
	if err != nil {
		return nil, nil, err
	}
	sid, bid := id("session-send"), id("session-send-bare")
	if _, err := e.startSession(ctx, sid, TollgateQueue, model, samples+2); err != nil {
		return nil, nil, err
	}
	if _, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: bid, TaskQueue: bareSessionQueue}, BareSessionName); err != nil {
		return nil, nil, err
	}
	tollgateIdle := func(ctx context.Context) (bool, error) {
		v, err := e.Client.QueryWorkflow(ctx, sid, "", workflows.ConversationQuery)
		if err != nil {
			return false, err
		}
		var c workflows.Conversation
		err = v.Get(&c)
		return c.Running == "" && len(c.Pending) == 0, err
	}
	bareIdle := func(ctx context.Context) (bool, error) {
		v, err := e.Client.QueryWorkflow(ctx, bid, "", bareSessionIdle)
		if err != nil {
			return false, err
		}
		var idle bool
		err = v.Get(&idle)
		return idle, err
	}
	// Sample 0 warms both sides up and is dropped.
	for i := 0; i <= samples; i++ {
		k := i + 1
		sides := []func() (time.Duration, error){
			func() (time.Duration, error) {
				return e.sendOne(ctx, sid, k, workflows.SendName, message(sid, k), tollgateIdle)
			},
			func() (time.Duration, error) {
				return e.sendOne(ctx, bid, k, bareSend, message(bid, k).Text, bareIdle)
			},
		}
		got := make([]time.Duration, 2)
		for j := range sides {
			side := (i + j) % 2
			if got[side], err = sides[side](); err != nil {
				return nil, nil, err
			}
		}
		if i > 0 {
			tollgate, bare = append(tollgate, got[0]), append(bare, got[1])
		}
	}
	if err := e.endSession(ctx, sid); err != nil {
		return nil, nil, err
	}
	h, err := e.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: bid, UpdateName: bareSessionNoMore, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return tollgate, bare, err
}

func (e *Env) sendOne(ctx context.Context, sid string, k int, update string, arg any, idle func(context.Context) (bool, error)) (time.Duration, error) {
	tid := turnOf(sid, k)
	start, done := e.Stamps.Arm(StartKey(tid)), e.Stamps.Arm(DoneKey(tid))
	defer e.Stamps.Disarm(StartKey(tid))
	defer e.Stamps.Disarm(DoneKey(tid))
	sent := time.Now()
	if _, err := e.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: sid, UpdateName: update, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageAccepted,
	}); err != nil {
		return 0, err
	}
	var first time.Time
	select {
	case first = <-start:
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("%s: no activity start within 30s", tid)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if err := e.Wait(ctx, tid, done, nil); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := idle(ctx)
		if err != nil {
			return 0, err
		}
		if ok {
			return first.Sub(sent), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s did not take in the end of %s within 30s", sid, tid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// idle is 9c for one side, in the manner of benchmark 3: a subprocess
// worker with a sticky cache of cache; total sessions each run one turn
// and then wait for their next message (bare: workflows wait for an
// Update), and the worker's memory is read at each checkpoint. They are
// left waiting: waking a thousand evicted sessions is benchmark 3's
// drain again, and would double this benchmark's time.
func (e *Env) idle(ctx context.Context, side string, total, cache int, checkpoints []int) (*Parked, error) {
	queue := "bench-idle-" + side
	p, err := startWorkerProc(side, e.Server.Address(), e.DataDir, queue, cache, e.Stamps, e.Profiles)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	model, err := e.sessionScript(1)
	if err != nil {
		return nil, err
	}
	open := func(ctx context.Context, wid string) error {
		if side == sideBare {
			_, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: queue}, BareAwaitName)
			return err
		}
		if _, err := e.startSession(ctx, wid, queue, model, 0); err != nil {
			return err
		}
		return e.chatTurn(ctx, wid, 1)
	}
	// Warm the worker up before the baseline.
	warm := make([]string, 5)
	for i := range warm {
		warm[i] = id("idle-warm-" + side)
		if err := open(ctx, warm[i]); err != nil {
			return nil, err
		}
	}
	if err := e.WaitParked(ctx, warm, 5); err != nil {
		return nil, err
	}
	r := &Parked{Side: side, Cache: cache}
	if _, err := r.park(ctx, e, p, total, checkpoints, "idle-"+side, open); err != nil {
		return nil, err
	}
	r.After = r.Points[len(r.Points)-1]
	return r, nil
}

// sessionReport is benchmark 9 (rows 9a–9c).
type sessionReport struct {
	*Sessions
	// Continues counts the session's continues-as-new; FirstRun and
	// LastRun are its first and last full runs.
	Continues         int
	FirstRun, LastRun SessionRun
	// Per turn, in the first and the last full run.
	FirstEvents, LastEvents, FirstBytes, LastBytes float64
	// Growth is the largest of the last-to-first ratios (session events,
	// session bytes, turn events, turn bytes); FlatHistory holds when
	// every one is within HistoryGoal of 1.
	Growth            float64
	HistoryGoal       float64
	GoalLow, GoalHigh float64
	FlatHistory       bool

	Samples                                int
	Send50, Send99, BareSend50, BareSend99 time.Duration
	SendRatio, SendGoal                    float64
	MetSend                                bool

	Idle *parkedReport
	// RunSizes says each run's turns, events and bytes, for the prose.
	RunSizes string
}

func newSessionReport(s *Sessions) *sessionReport {
	r := &sessionReport{Sessions: s, HistoryGoal: 0.10, SendGoal: 1.3, Samples: len(s.Send)}
	r.GoalLow, r.GoalHigh = 1-r.HistoryGoal, 1+r.HistoryGoal
	full := len(s.Runs)
	for full > 0 && s.Runs[full-1].Turns < s.PerRun {
		full--
	}
	if full > 0 {
		r.Continues = len(s.Runs) - 1
		r.FirstRun, r.LastRun = s.Runs[0], s.Runs[full-1]
		n := float64(s.PerRun)
		r.FirstEvents, r.LastEvents = float64(r.FirstRun.Events)/n, float64(r.LastRun.Events)/n
		r.FirstBytes, r.LastBytes = float64(r.FirstRun.Bytes)/n, float64(r.LastRun.Bytes)/n
		r.FlatHistory = true
		for _, pair := range [][2]float64{
			{r.LastEvents, r.FirstEvents}, {r.LastBytes, r.FirstBytes},
			{s.Last.Events, s.First.Events}, {s.Last.Bytes, s.First.Bytes},
		} {
			g := ratio(pair[0], pair[1])
			r.Growth = max(r.Growth, g)
			r.FlatHistory = r.FlatHistory && g >= r.GoalLow && g <= r.GoalHigh
		}
	}
	sizes := make([]string, len(s.Runs))
	for i, run := range s.Runs {
		sizes[i] = fmt.Sprintf("run %d: %d turns, %d events, %s", i+1, run.Turns, run.Events, bytesStr(float64(run.Bytes)))
	}
	r.RunSizes = strings.Join(sizes, "; ")
	r.Send50, r.Send99 = Percentile(s.Send, 50), Percentile(s.Send, 99)
	r.BareSend50, r.BareSend99 = Percentile(s.BareSend, 50), Percentile(s.BareSend, 99)
	r.SendRatio = ratio(float64(r.Send50), float64(r.BareSend50))
	r.MetSend = r.SendRatio <= r.SendGoal
	if s.Idle[0] != nil && s.Idle[1] != nil {
		r.Idle = newParkedReport(s.Idle[0], s.Idle[1])
		// Idle sessions are not drained: drop benchmark 3's last row.
		r.Idle.Rows = r.Idle.Rows[:len(r.Idle.Rows)-1]
	}
	return r
}

// Met reports whether every goal of benchmark 9 was met.
func (r *sessionReport) Met() bool {
	return r.FlatHistory && r.MetSend && (r.Idle == nil || r.Idle.Flat)
}
