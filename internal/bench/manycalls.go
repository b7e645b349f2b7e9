package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// ManyCallsConfig sizes benchmark 10: one turn of Calls sequential no-op
// tool calls, against ShortReps turns of ShortCalls calls and as many
// bare loops of ShortCalls activities, all on one subprocess worker
// whose memory is sampled every SampleEvery.
type ManyCallsConfig struct {
	Calls, ShortCalls, ShortReps int
	SampleEvery                  time.Duration
}

// ManyCalls is benchmark 10: a turn with no length limit.
type ManyCalls struct {
	Calls, ShortCalls int
	// Long is the long turn's wall time; Short the short turns' and Bare
	// the bare loops' (each 2×ShortCalls+1 activities, the short turn's
	// activity count).
	Long        time.Duration
	Short, Bare []time.Duration
	// Answered is the long turn's calls that ended succeeded (its shown
	// cards plus the counted ones); ToolCalls what its result counts.
	Answered, ToolCalls int
	// Compactions is how often the long turn compacted its conversation,
	// against Window, the scripted model's context window in tokens.
	Compactions, Window int
	// Runs are the long turn's runs, oldest first.
	Runs []RunSize
	// Mem are the worker's samples while the long turn ran.
	Mem []MemSample
}

// RunSize is one run of a turn: its history and when it began.
type RunSize struct {
	Events  int
	Bytes   int64
	Started time.Time
}

// MemSample is the worker's memory At some time.
type MemSample struct {
	At time.Time
	Mem
}

// ManyCallsWindow is benchmark 10's model's context window: a small
// model's, so that the long turn compacts several times over its calls,
// as it would with such a model.
const ManyCallsWindow = 32_000

// manyCallsInput is a turn of benchmark 10, told its model's window.
func manyCallsInput(model string, calls int) workflows.Input {
	in := TurnInput(model, calls, false)
	in.Policy.ContextTokens = ManyCallsWindow
	return in
}

// ManyCalls runs benchmark 10 on a subprocess worker of its own.
func (e *Env) ManyCalls(ctx context.Context, cfg ManyCallsConfig) (*ManyCalls, error) {
	queue := "bench-many-calls"
	p, err := startWorkerProc(sideTollgate, e.Server.Address(), e.DataDir, queue, 10, e.Stamps, e.Profiles)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	r := &ManyCalls{Calls: cfg.Calls, ShortCalls: cfg.ShortCalls, Window: ManyCallsWindow}
	short, err := e.ScriptWindow(cfg.ShortCalls, 1, NoopTool, struct{}{}, ManyCallsWindow)
	if err != nil {
		return nil, err
	}
	long, err := e.ScriptWindow(cfg.Calls, 1, NoopTool, struct{}{}, ManyCallsWindow)
	if err != nil {
		return nil, err
	}
	run := func(wid string, in workflows.Input) (workflows.Result, string, error) {
		done := e.Stamps.Arm(DoneKey(wid))
		defer e.Stamps.Disarm(DoneKey(wid))
		wr, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: queue}, workflows.WorkflowName, Unique(in, wid))
		if err != nil {
			return workflows.Result{}, "", err
		}
		var res workflows.Result
		// The long turn takes minutes; its stamp comes when its last run
		// ends, not at a continue-as-new.
		if err := waitClosedWithin(ctx, e.Client, wid, done, &res, time.Hour); err != nil {
			return res, "", err
		}
		if res.Status != workflows.StatusCompleted {
			return res, "", fmt.Errorf("turn %s ended %s: %s", wid, res.Status, res.Error)
		}
		return res, wr.GetRunID(), nil
	}
	// One unmeasured round warms both sides.
	for i := -1; i < cfg.ShortReps; i++ {
		d, err := timed(func() error { _, _, err := run(id("many-short"), manyCallsInput(short, cfg.ShortCalls)); return err })
		if err != nil {
			return nil, err
		}
		b, err := timed(func() error { return e.RunBare(ctx, id("many-bare"), BareLoopName, cfg.ShortCalls) })
		if err != nil {
			return nil, err
		}
		if i >= 0 {
			r.Short, r.Bare = append(r.Short, d), append(r.Bare, b)
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sampleErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(cfg.SampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				m, err := p.mem()
				if err != nil {
					sampleErr = err
					return
				}
				r.Mem = append(r.Mem, MemSample{At: time.Now(), Mem: m})
			}
		}
	}()
	wid := id("many-long")
	var res workflows.Result
	var first string
	longTurn := func() error { var err error; res, first, err = run(wid, manyCallsInput(long, cfg.Calls)); return err }
	if e.Profiles != "" {
		// The worker's CPU profile, and this process's (the server's).
		if err := p.profile("cpu", "manycalls-worker.cpu"); err != nil {
			return nil, err
		}
		inner := longTurn
		longTurn = func() error {
			_, err := profileCPU(e.Profiles, "manycalls-server.cpu", cfg.Calls, inner)
			return err
		}
	}
	r.Long, err = timed(longTurn)
	if e.Profiles != "" {
		if perr := p.profile("cpustop", ""); perr != nil && err == nil {
			err = perr
		}
		// What the worker still holds once the turn ended: a conversation
		// kept past its use shows here.
		if perr := p.profile("heap", "manycalls-worker.heap"); perr != nil && err == nil {
			err = perr
		}
	}
	close(stop)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if sampleErr != nil {
		return nil, fmt.Errorf("sample the worker's memory: %w", sampleErr)
	}
	r.ToolCalls, r.Compactions = res.ToolCalls, res.Compactions
	for _, c := range res.Cards {
		if c.State == results.StateSucceeded {
			r.Answered++
		}
	}
	if res.Omitted != nil {
		r.Answered += res.Omitted.ByState[results.StateSucceeded]
	}
	if r.Runs, err = e.runSizes(ctx, wid, first); err != nil {
		return nil, err
	}
	return r, nil
}

// runSizes follows a workflow's chain of continue-as-new from its first
// run, measuring each run's history.
func (e *Env) runSizes(ctx context.Context, wid, runID string) ([]RunSize, error) {
	var runs []RunSize
	for runID != "" {
		var r RunSize
		next := ""
		it := e.Client.GetWorkflowHistory(ctx, wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return nil, err
			}
			if r.Events == 0 {
				r.Started = ev.GetEventTime().AsTime()
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
			r.Events++
			r.Bytes += int64(proto.Size(ev))
		}
		runs = append(runs, r)
		runID = next
	}
	return runs, nil
}

// Largest is the run with the most bytes.
func (m *ManyCalls) Largest() RunSize {
	var l RunSize
	for _, r := range m.Runs {
		if r.Bytes > l.Bytes || r.Bytes == l.Bytes && r.Events > l.Events {
			l = r
		}
	}
	return l
}

// MaxEvents is the most events any run had.
func (m *ManyCalls) MaxEvents() int {
	n := 0
	for _, r := range m.Runs {
		n = max(n, r.Events)
	}
	return n
}

// PerCall is the long turn's time a call; ShortPerCall the short turns'
// median, BarePerCall the bare loops' median over ShortCalls.
func (m *ManyCalls) PerCall() time.Duration { return m.Long / time.Duration(max(1, m.Calls)) }
func (m *ManyCalls) ShortPerCall() time.Duration {
	return Median(m.Short) / time.Duration(max(1, m.ShortCalls))
}
func (m *ManyCalls) BarePerCall() time.Duration {
	return Median(m.Bare) / time.Duration(max(1, m.ShortCalls))
}

// MemAfter splits the memory samples at the second run's start: the
// first sample after it and the largest live heap and anonymous RSS of
// every sample from then on. ok is false when the turn never continued
// as new or no sample fell after it.
func (m *ManyCalls) MemAfter() (first Mem, peakHeap, peakAnon uint64, n int, ok bool) {
	if len(m.Runs) < 2 {
		return first, 0, 0, 0, false
	}
	at := m.Runs[1].Started
	i := slices.IndexFunc(m.Mem, func(s MemSample) bool { return s.At.After(at) })
	if i < 0 {
		return first, 0, 0, 0, false
	}
	first = m.Mem[i].Mem
	for _, s := range m.Mem[i:] {
		peakHeap, peakAnon = max(peakHeap, s.HeapLive), max(peakAnon, s.RSSAnon)
		n++
	}
	return first, peakHeap, peakAnon, n, true
}

// Continues is how often the long turn continued as new.
func (m *ManyCalls) Continues() int { return max(0, len(m.Runs)-1) }
