package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

var seq atomic.Int64

// id makes a workflow id unique within the run.
func id(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// RunTurn runs a turn to its end and checks it completed.
func (e *Env) RunTurn(ctx context.Context, wid string, in workflows.Input) (workflows.Result, error) {
	return e.runTurnOn(ctx, TollgateQueue, wid, in)
}

// runTurnOn is RunTurn on a Tollgate worker's queue.
func (e *Env) runTurnOn(ctx context.Context, queue, wid string, in workflows.Input) (workflows.Result, error) {
	done := e.Stamps.Arm(DoneKey(wid))
	defer e.Stamps.Disarm(DoneKey(wid))
	if _, err := e.startTurnOn(ctx, queue, wid, in); err != nil {
		return workflows.Result{}, err
	}
	var res workflows.Result
	if err := e.Wait(ctx, wid, done, &res); err != nil {
		return res, err
	}
	if res.Status != workflows.StatusCompleted {
		return res, fmt.Errorf("turn %s ended %s: %s", wid, res.Status, res.Error)
	}
	return res, nil
}

// RunBare runs a bare workflow to its end.
func (e *Env) RunBare(ctx context.Context, wid string, wf string, args ...any) error {
	done := e.Stamps.Arm(DoneKey(wid))
	defer e.Stamps.Disarm(DoneKey(wid))
	if _, err := e.StartBare(ctx, wid, wf, args...); err != nil {
		return err
	}
	return e.Wait(ctx, wid, done, nil)
}

func timed(f func() error) (time.Duration, error) {
	t := time.Now()
	err := f()
	return time.Since(t), err
}

// ToolCalls is benchmark 1: one turn at a time, each running n sequential
// tool calls, as activities (Tollgate) and as local activities (Local),
// against bare workflows running n activities (BareSeq) and 2n+1
// activities (BareLoop: the same activity count as the turn with activity
// tools).
type ToolCalls struct {
	N                                int
	Tollgate, Local, BareN, BareLoop []time.Duration
	// Decomposition of the measured Tollgate turns (activity tools and
	// local tools) and bare loops, from history timestamps, summed over
	// the reps.
	Hops, LocalHops, LoopHops HopBreakdown
	// Mean time inside each activity function, by type.
	InCallModel, InRunTool, InBare time.Duration
	// Profile is a CPU profile of this process while it ran ProfileTurns
	// more turns with local tools (activity tools if LocalTools is
	// false), after the measured ones.
	Profile      *CPUProfile
	ProfileTurns int
}

// LocalTools reports whether the local-tool turns ran their calls as
// local activities: their histories hold only the model calls' activity
// tasks. A worker without local tools runs them as activities, and then
// the local rows are not available.
func (tc *ToolCalls) LocalTools() bool {
	reps := len(tc.Local)
	return reps > 0 && tc.LocalHops.Activities == reps*(tc.N+1)
}

// profileTurns is how many local-tool turns benchmark 1 profiles.
const profileTurns = 5

func (e *Env) ToolCalls(ctx context.Context, n, reps int) (*ToolCalls, error) {
	model, err := e.Script(n, 1, NoopTool, struct{}{})
	if err != nil {
		return nil, err
	}
	localModel, err := e.Script(n, 1, NoopLocalTool, struct{}{})
	if err != nil {
		return nil, err
	}
	r := &ToolCalls{N: n}
	// One unmeasured round warms every code path on both sides.
	for i := -1; i < reps; i++ {
		if i == 0 {
			ActivityTimes.Reset()
		}
		tid, fid, lid := id("calls-tollgate"), id("calls-local"), id("calls-loop")
		runs := []func() error{
			func() error { _, err := e.RunTurn(ctx, tid, TurnInput(model, n, false)); return err },
			func() error { _, err := e.RunTurn(ctx, fid, LocalTurnInput(localModel, n, false)); return err },
			func() error { return e.RunBare(ctx, id("calls-bare"), BareSeqName, n) },
			func() error { return e.RunBare(ctx, lid, BareLoopName, n) },
		}
		// Rotate the order so no side always runs first or last.
		got := make([]time.Duration, len(runs))
		for k := range runs {
			j := (i + len(runs) + k) % len(runs)
			d, err := timed(runs[j])
			if err != nil {
				return nil, err
			}
			got[j] = d
		}
		if i < 0 {
			continue
		}
		r.Tollgate, r.Local = append(r.Tollgate, got[0]), append(r.Local, got[1])
		r.BareN, r.BareLoop = append(r.BareN, got[2]), append(r.BareLoop, got[3])
		for _, h := range []struct {
			wid string
			sum *HopBreakdown
		}{{tid, &r.Hops}, {fid, &r.LocalHops}, {lid, &r.LoopHops}} {
			got, err := e.hops(ctx, h.wid)
			if err != nil {
				return nil, err
			}
			h.sum.add(got)
		}
	}
	r.InCallModel, _ = ActivityTimes.Mean("CallModel")
	r.InRunTool, _ = ActivityTimes.Mean("RunTool")
	r.InBare, _ = ActivityTimes.Mean(bareNoop)

	// The profile runs after the measured reps, which it would slow.
	profModel, in := localModel, LocalTurnInput
	if !r.LocalTools() {
		profModel, in = model, TurnInput
	}
	r.ProfileTurns = profileTurns
	r.Profile, err = profileCPU(e.Profiles, "cpu-tool-calls.pb.gz", profileTurns*n, func() error {
		for k := 0; k < profileTurns; k++ {
			if _, err := e.RunTurn(ctx, id("calls-profile"), in(profModel, n, false)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// HopBreakdown splits a turn's time by where it was spent, from the
// history's event timestamps.
type HopBreakdown struct {
	// WFTQueue: workflow task scheduled → started (server dispatch).
	// WFTRun: workflow task started → completed (worker + completion RPC).
	// Activity: activity scheduled → completed (dispatch + run + report).
	WFTQueue, WFTRun, Activity time.Duration
	WFTs, Activities           int
}

func (h *HopBreakdown) add(o HopBreakdown) {
	h.WFTQueue += o.WFTQueue
	h.WFTRun += o.WFTRun
	h.Activity += o.Activity
	h.WFTs += o.WFTs
	h.Activities += o.Activities
}

func (e *Env) hops(ctx context.Context, wid string) (HopBreakdown, error) {
	var h HopBreakdown
	it := e.Client.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var wftScheduled, wftStarted time.Time
	actScheduled := map[int64]time.Time{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return h, err
		}
		t := ev.EventTime.AsTime()
		switch ev.EventType {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			wftScheduled = t
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			wftStarted = t
			h.WFTQueue += t.Sub(wftScheduled)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			h.WFTRun += t.Sub(wftStarted)
			h.WFTs++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			actScheduled[ev.EventId] = t
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			h.Activity += t.Sub(actScheduled[ev.GetActivityTaskCompletedEventAttributes().ScheduledEventId])
			h.Activities++
		}
	}
	return h, nil
}

// Resume is benchmark 2: latency from a respond update's acceptance (its
// validator passed on the worker) to the tool activity's start, and from
// the client sending it to the same start.
type Resume struct {
	TollgateAccept, BareAccept []time.Duration
	TollgateSend, BareSend     []time.Duration
}

func (e *Env) Resume(ctx context.Context, perRep, reps int) (*Resume, error) {
	model, err := e.Script(1, 1, NoopTool, struct{}{})
	if err != nil {
		return nil, err
	}
	r := &Resume{}
	approve := workflows.Response{CallID: "call_1_1", Decision: results.DecisionApprove, By: "bench"}
	for rep := 0; rep < reps; rep++ {
		tids, bids := make([]string, perRep+1), make([]string, perRep+1)
		err := Pool(ctx, 20, perRep+1, func(ctx context.Context, i int) error {
			tids[i], bids[i] = id("resume-tollgate"), id("resume-bare")
			if _, err := e.StartTurn(ctx, tids[i], TurnInput(model, 1, true)); err != nil {
				return err
			}
			_, err := e.StartBare(ctx, bids[i], BareAwaitName)
			return err
		})
		if err != nil {
			return nil, err
		}
		if err := e.WaitParked(ctx, append(append([]string(nil), tids...), bids...), 20); err != nil {
			return nil, err
		}
		// Sample 0 of each rep warms up and is dropped.
		for i := 0; i <= perRep; i++ {
			ta, ts, err := e.resumeOne(ctx, tids[i], workflows.RespondName, approve)
			if err != nil {
				return nil, fmt.Errorf("tollgate: %w", err)
			}
			ba, bs, err := e.resumeOne(ctx, bids[i], BareRespond, "approve")
			if err != nil {
				return nil, fmt.Errorf("bare: %w", err)
			}
			if i == 0 {
				continue
			}
			r.TollgateAccept, r.TollgateSend = append(r.TollgateAccept, ta), append(r.TollgateSend, ts)
			r.BareAccept, r.BareSend = append(r.BareAccept, ba), append(r.BareSend, bs)
		}
	}
	return r, nil
}

func (e *Env) resumeOne(ctx context.Context, wid, update string, arg any) (fromAccept, fromSend time.Duration, err error) {
	acc, start, done := e.Stamps.Arm(AcceptKey(wid)), e.Stamps.Arm(StartKey(wid)), e.Stamps.Arm(DoneKey(wid))
	defer e.Stamps.Disarm(AcceptKey(wid))
	defer e.Stamps.Disarm(StartKey(wid))
	defer e.Stamps.Disarm(DoneKey(wid))
	sent := time.Now()
	if _, err := e.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: wid, UpdateName: update, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageAccepted,
	}); err != nil {
		return 0, 0, err
	}
	var accepted, started time.Time
	timeout := time.After(30 * time.Second)
	for accepted.IsZero() || started.IsZero() {
		select {
		case t := <-acc:
			accepted = t
		case t := <-start:
			if started.IsZero() {
				started = t
			}
		case <-timeout:
			return 0, 0, fmt.Errorf("%s: no acceptance or activity start within 30s", wid)
		}
	}
	// Let the workflow finish so the next sample runs on a quiet system.
	if err := e.Wait(ctx, wid, done, nil); err != nil {
		return 0, 0, err
	}
	return started.Sub(accepted), started.Sub(sent), nil
}

// WaitParked waits until every workflow has no pending workflow task and
// no pending activity: it has done all it can and waits for a person.
func (e *Env) WaitParked(ctx context.Context, ids []string, width int) error {
	return WaitParked(ctx, e.Client, ids, width)
}

func WaitParked(ctx context.Context, c client.Client, ids []string, width int) error {
	deadline := time.Now().Add(5 * time.Minute)
	left := ids
	for {
		parked := make([]bool, len(left))
		err := Pool(ctx, width, len(left), func(ctx context.Context, i int) error {
			d, err := c.DescribeWorkflowExecution(ctx, left[i], "")
			if err != nil {
				return err
			}
			info := d.GetWorkflowExecutionInfo()
			if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return fmt.Errorf("%s is %s, not waiting", left[i], info.GetStatus())
			}
			parked[i] = d.GetPendingWorkflowTask() == nil && len(d.GetPendingActivities()) == 0 && info.GetHistoryLength() >= 4
			return nil
		})
		if err != nil {
			return err
		}
		var still []string
		for i, p := range parked {
			if !p {
				still = append(still, left[i])
			}
		}
		if len(still) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d workflows did not park within 5 minutes, %s among them", len(still), still[0])
		}
		left = still
		time.Sleep(50 * time.Millisecond)
	}
}

// Throughput is benchmark 4: turns per second with a fixed number in
// flight.
type Throughput struct {
	Calls, InFlight, Total int
	// Per second, one per rep: turns with activity tools and with local
	// tools, bare workflows of Calls activities, bare loops.
	Tollgate, Local, BareN, BareLoop []float64
	// RPCRate is the client's calls per second (workers' polls included)
	// during each kind's runs: Tollgate, bare, loop, local; the highest
	// rep.
	RPCRate [4]float64
}

func (e *Env) Throughput(ctx context.Context, calls, inFlight, total, reps int) (*Throughput, error) {
	model, err := e.Script(calls, 1, NoopTool, struct{}{})
	if err != nil {
		return nil, err
	}
	r := &Throughput{Calls: calls, InFlight: inFlight, Total: total}
	rate := func(n int, f func(ctx context.Context, i int) error) (float64, error) {
		d, err := timed(func() error { return Pool(ctx, inFlight, n, f) })
		return float64(n) / d.Seconds(), err
	}
	localModel, err := e.Script(calls, 1, NoopLocalTool, struct{}{})
	if err != nil {
		return nil, err
	}
	turn := func(ctx context.Context, _ int) error {
		_, err := e.RunTurn(ctx, id("tput-tollgate"), TurnInput(model, calls, false))
		return err
	}
	local := func(ctx context.Context, _ int) error {
		_, err := e.RunTurn(ctx, id("tput-local"), LocalTurnInput(localModel, calls, false))
		return err
	}
	bare := func(ctx context.Context, _ int) error { return e.RunBare(ctx, id("tput-bare"), BareSeqName, calls) }
	loop := func(ctx context.Context, _ int) error { return e.RunBare(ctx, id("tput-loop"), BareLoopName, calls) }
	// Warm up every path with a short burst.
	kinds := []func(context.Context, int) error{turn, bare, loop, local}
	for _, f := range kinds {
		if _, err := rate(min(10, total), f); err != nil {
			return nil, err
		}
	}
	for i := 0; i < reps; i++ {
		// Rotate the order so no side always runs first or last.
		got := make([]float64, len(kinds))
		for k := range kinds {
			j := (i + k) % len(kinds)
			n0, t0 := RPCs.Load(), time.Now()
			v, err := rate(total, kinds[j])
			if err != nil {
				return nil, err
			}
			got[j] = v
			r.RPCRate[j] = max(r.RPCRate[j], float64(RPCs.Load()-n0)/time.Since(t0).Seconds())
		}
		r.Tollgate, r.BareN, r.BareLoop = append(r.Tollgate, got[0]), append(r.BareN, got[1]), append(r.BareLoop, got[2])
		r.Local = append(r.Local, got[3])
	}
	return r, nil
}

// HistorySize is one measured history.
type HistorySize struct {
	Steps, Calls, OutputBytes int
	Events                    int
	Bytes                     int64
	// MaxEvent is the largest single event.
	MaxEvent int
	// Payloads and Transcripts are what this run added to the external
	// payload store and the transcript store.
	Payloads, Transcripts int64
}

// wideWindow is the context window of the models of benchmark 5a-5d, a
// million tokens as the largest real models have.
const wideWindow = 1_000_000

// History measures a turn of steps steps with calls tool calls each.
// Nothing else may run on the worker meanwhile: it reads the stores'
// growth.
func (e *Env) History(ctx context.Context, steps, calls, outputBytes int) (HistorySize, error) {
	h := HistorySize{Steps: steps, Calls: calls, OutputBytes: outputBytes}
	toolName, args := NoopTool, any(struct{}{})
	if outputBytes > 0 {
		toolName, args = BlobTool, blobArgs{Bytes: outputBytes}
	}
	// Benchmark 5a-5d measure history without compaction: a model whose
	// window no turn of theirs nears.
	model, err := e.ScriptWindow(steps, calls, toolName, args, wideWindow)
	if err != nil {
		return h, err
	}
	p0, t0, err := e.storedBytes()
	if err != nil {
		return h, err
	}
	wid := id("history-tollgate")
	in := TurnInput(model, steps, false)
	in.Policy.ContextTokens = wideWindow
	if _, err := e.RunTurn(ctx, wid, in); err != nil {
		return h, err
	}
	p1, t1, err := e.storedBytes()
	if err != nil {
		return h, err
	}
	h.Payloads, h.Transcripts = p1-p0, t1-t0
	h.Events, h.Bytes, h.MaxEvent, err = e.historySize(ctx, wid)
	return h, err
}

// storedBytes is the size of the payload store and of the transcript
// store.
func (e *Env) storedBytes() (payloads, transcripts int64, err error) {
	if _, payloads, err = e.Payloads.Stats(); err != nil {
		return 0, 0, err
	}
	_, transcripts, err = e.Transcripts.Stats()
	return payloads, transcripts, err
}

// BareHistory measures a bare workflow of steps activities each returning
// outputBytes.
func (e *Env) BareHistory(ctx context.Context, steps, outputBytes int) (HistorySize, error) {
	h := HistorySize{Steps: steps, Calls: 1, OutputBytes: outputBytes}
	wid := id("history-bare")
	if err := e.RunBare(ctx, wid, BareBlobName, steps, outputBytes); err != nil {
		return h, err
	}
	var err error
	h.Events, h.Bytes, h.MaxEvent, err = e.historySize(ctx, wid)
	return h, err
}

// historySize sums the encoded size of every event, which is what the
// server stores and what counts toward its 50 MB limit.
func (e *Env) historySize(ctx context.Context, wid string) (events int, size int64, maxEvent int, err error) {
	it := e.Client.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return 0, 0, 0, err
		}
		n := proto.Size(ev)
		events++
		size += int64(n)
		maxEvent = max(maxEvent, n)
	}
	if events == 0 {
		return 0, 0, 0, errors.New("empty history")
	}
	return events, size, maxEvent, nil
}

// ResultWaits runs n Tollgate turns (3 tool calls) and n bare loops (7
// activities), alternating, one at a time, and waits for each the usual
// client way (run.Get, a long poll on the close event). It counts the
// waits that outlasted the workflow function's return by more than
// threshold, and the longest lag.
func (e *Env) ResultWaits(ctx context.Context, n int, threshold time.Duration) (stalls [2]int, worst time.Duration, err error) {
	model, err := e.Script(3, 1, NoopTool, struct{}{})
	if err != nil {
		return stalls, 0, err
	}
	wait := func(wid string, start func() (client.WorkflowRun, error)) (time.Duration, error) {
		done := e.Stamps.Arm(DoneKey(wid))
		defer e.Stamps.Disarm(DoneKey(wid))
		run, err := start()
		if err != nil {
			return 0, err
		}
		if err := run.Get(ctx, nil); err != nil {
			return 0, err
		}
		got := time.Now()
		select {
		case returned := <-done:
			return got.Sub(returned), nil
		case <-time.After(5 * time.Second):
			return 0, fmt.Errorf("%s: no done stamp", wid)
		}
	}
	for i := 0; i < n; i++ {
		for side := 0; side < 2; side++ {
			wid := id("wait")
			lag, err := wait(wid, func() (client.WorkflowRun, error) {
				if side == 0 {
					return e.StartTurn(ctx, wid, TurnInput(model, 3, false))
				}
				return e.StartBare(ctx, wid, BareLoopName, 3)
			})
			if err != nil {
				return stalls, 0, err
			}
			worst = max(worst, lag)
			if lag > threshold {
				stalls[side]++
			}
		}
	}
	return stalls, worst, nil
}
