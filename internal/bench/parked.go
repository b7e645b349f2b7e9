package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// The parked-turn benchmark runs each side's worker in a subprocess (this
// same binary, re-executed), so that the worker's memory is measured
// apart from the embedded server and the driver.
const (
	envWorker  = "TOLLGATE_BENCH_WORKER"
	envAddress = "TOLLGATE_BENCH_ADDRESS"
	envData    = "TOLLGATE_BENCH_DATA"
	envQueue   = "TOLLGATE_BENCH_QUEUE"
	envCache   = "TOLLGATE_BENCH_CACHE"
	// envProfiles says the driver will ask for heap profiles: sample
	// every 4 KiB allocated instead of every 512 KiB.
	envProfiles = "TOLLGATE_BENCH_PROFILES"

	sideTollgate = "tollgate"
	sideBare     = "bare"
)

// MaybeRunWorker turns this process into a benchmark worker when it was
// started as one, and never returns then. Call it first in main or
// TestMain.
func MaybeRunWorker() { runAs(envWorker, "bench worker", runWorker) }

// runAs turns this process into a subprocess worker when the environment
// variable env names its side: it runs serve for that side and exits.
func runAs(env, name string, serve func(side string) error) {
	side := os.Getenv(env)
	if side == "" {
		return
	}
	if err := serve(side); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runWorker(side string) error {
	cache, err := strconv.Atoi(os.Getenv(envCache))
	if err != nil {
		return fmt.Errorf("%s: %w", envCache, err)
	}
	worker.SetStickyWorkflowCacheSize(cache)
	if os.Getenv(envProfiles) != "" {
		runtime.MemProfileRate = 4096
	}
	dataDir := os.Getenv(envData)
	c, err := Dial(os.Getenv(envAddress), dataDir)
	if err != nil {
		return err
	}
	defer c.Close()
	// Forward every "workflow returned" stamp to the driver, which waits
	// on them as it does for in-process workers.
	var out sync.Mutex
	stamps := NewStamps()
	stamps.sink = func(key string, _ time.Time) {
		if strings.HasPrefix(key, "done/") {
			out.Lock()
			defer out.Unlock()
			fmt.Println("stamp " + key)
		}
	}
	opts := WorkerOptions(stamps)
	if side == sideTollgate {
		plugin, err := NewPlugin(dataDir)
		if err != nil {
			return err
		}
		opts.Plugins = []worker.Plugin{plugin}
	}
	w, err := startSide(c, side, opts, RegisterBare)
	if err != nil {
		return err
	}
	defer w.Stop()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		var reply string
		switch cmd {
		case "stats":
			data, err := json.Marshal(readMem())
			if err != nil {
				return err
			}
			reply = "mem " + string(data)
		case "heap", "cpu", "cpustop":
			reply = "done"
			if err := profileCommand(cmd, arg); err != nil {
				reply = "done " + err.Error()
			}
		default:
			continue
		}
		out.Lock()
		fmt.Println(reply)
		out.Unlock()
	}
	return nil
}

// Mem is a worker process's memory after a full GC.
type Mem struct {
	// HeapLive is the live heap after GC (runtime/metrics
	// /gc/heap/live:bytes): what the worker holds.
	HeapLive uint64 `json:"heap_live"`
	// RSS is VmRSS after GC and returning free memory to the OS; HWM is
	// the peak RSS so far.
	RSS uint64 `json:"rss"`
	HWM uint64 `json:"hwm"`
	// RSSAnon is the anonymous part of RSS (heap, stacks, runtime), RSS
	// less the mapped binary and files.
	RSSAnon    uint64 `json:"rss_anon"`
	Goroutines int    `json:"goroutines"`
}

func readMem() Mem {
	runtime.GC()
	debug.FreeOSMemory()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/sched/goroutines:goroutines"}}
	metrics.Read(s)
	m := Mem{HeapLive: s[0].Value.Uint64(), Goroutines: int(s[1].Value.Uint64())}
	m.RSS, m.HWM, m.RSSAnon = procStatus("VmRSS"), procStatus("VmHWM"), procStatus("RssAnon")
	return m
}

func procStatus(field string) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// startSide starts a worker on the driver's queue for side, Tollgate's
// as opts' plugins enable it or bare's as registerBare registers it, and
// tells the driver it is ready.
func startSide(c client.Client, side string, opts worker.Options, registerBare func(worker.Registry)) (worker.Worker, error) {
	w := worker.New(c, os.Getenv(envQueue), opts)
	switch side {
	case sideTollgate:
	case sideBare:
		registerBare(w)
	default:
		return nil, fmt.Errorf("unknown side %q", side)
	}
	if err := w.Start(); err != nil {
		return nil, err
	}
	fmt.Println("ready")
	return w, nil
}

// subprocess is this binary re-executed as a worker.
type subprocess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// closed is closed once its stdout ends, after the last onLine.
	closed chan struct{}
}

var errNotReady = errors.New("did not start within a minute")

// startSubprocess re-executes this binary with env added to its
// environment and its stderr going to stderr, and returns once it says
// it is ready; every other line it prints goes to onLine, if any. A
// process not ready within a minute is killed (errNotReady).
func startSubprocess(env []string, stderr io.Writer, onLine func(string)) (*subprocess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &subprocess{cmd: cmd, stdin: stdin, closed: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(p.closed)
		out := bufio.NewScanner(stdout)
		for out.Scan() {
			if line := out.Text(); line == "ready" {
				close(ready)
			} else if onLine != nil {
				onLine(line)
			}
		}
	}()
	select {
	case <-ready:
		return p, nil
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, errNotReady
	}
}

// workerProc is a running subprocess worker.
type workerProc struct {
	*subprocess
	mems, acks chan string
	// profiles, when set, is the directory its profiles are written to.
	profiles string
}

func startWorkerProc(side, address, dataDir, queue string, cache int, stamps *Stamps, profiles string) (*workerProc, error) {
	p := &workerProc{mems: make(chan string, 1), acks: make(chan string, 1), profiles: profiles}
	env := []string{envWorker + "=" + side, envAddress + "=" + address, envData + "=" + dataDir,
		envQueue + "=" + queue, envCache + "=" + strconv.Itoa(cache)}
	if profiles != "" {
		env = append(env, envProfiles+"=1")
	}
	var err error
	p.subprocess, err = startSubprocess(env, os.Stderr, func(line string) {
		if key, ok := strings.CutPrefix(line, "stamp "); ok {
			stamps.fire(key, time.Now())
		} else if mem, ok := strings.CutPrefix(line, "mem "); ok {
			p.mems <- mem
		} else if line == "done" || strings.HasPrefix(line, "done ") {
			p.acks <- strings.TrimPrefix(strings.TrimPrefix(line, "done"), " ")
		}
	})
	if err != nil {
		return nil, fmt.Errorf("bench worker %s: %w", side, err)
	}
	go func() { <-p.closed; close(p.mems); close(p.acks) }()
	return p, nil
}

func (p *workerProc) mem() (Mem, error) {
	var m Mem
	if _, err := fmt.Fprintln(p.stdin, "stats"); err != nil {
		return m, err
	}
	line, ok := <-p.mems
	if !ok {
		return m, fmt.Errorf("bench worker exited")
	}
	return m, json.Unmarshal([]byte(line), &m)
}

func (p *workerProc) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// Parked is benchmark 3 for one side.
type Parked struct {
	Side  string
	Cache int
	// Points are the worker's memory with Counts[i] turns parked.
	Counts []int
	Points []Mem
	// Park is how long starting all turns until all were parked took;
	// Drain how long approving all of them until all completed took.
	Park, Drain time.Duration
	After       Mem
}

// ParkedTurns parks total turns (or bare workflows) on a subprocess
// worker with the given sticky cache, reading its memory at each
// checkpoint, then approves them all and times the drain.
func (e *Env) ParkedTurns(ctx context.Context, side string, total, cache int, checkpoints []int) (*Parked, error) {
	queue := "bench-parked-" + side
	p, err := startWorkerProc(side, e.Server.Address(), e.DataDir, queue, cache, e.Stamps, e.Profiles)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	model, err := e.Script(1, 1, NoopTool, struct{}{})
	if err != nil {
		return nil, err
	}
	start := func(ctx context.Context, wid string) error {
		opts := client.StartWorkflowOptions{ID: wid, TaskQueue: queue}
		var err error
		if side == sideTollgate {
			_, err = e.Client.ExecuteWorkflow(ctx, opts, workflows.WorkflowName, Unique(TurnInput(model, 1, true), wid))
		} else {
			_, err = e.Client.ExecuteWorkflow(ctx, opts, BareAwaitName)
		}
		return err
	}
	approve := func(ctx context.Context, wid string) error {
		done := e.Stamps.Arm(DoneKey(wid))
		defer e.Stamps.Disarm(DoneKey(wid))
		var arg any = "approve"
		name := BareRespond
		if side == sideTollgate {
			arg, name = workflows.Response{CallID: "call_1_1", Decision: results.DecisionApprove, By: "bench"}, workflows.RespondName
		}
		if _, err := e.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: wid, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageAccepted,
		}); err != nil {
			return err
		}
		return e.Wait(ctx, wid, done, nil)
	}
	// Warm the worker up with a few full turns before the baseline.
	for i := 0; i < 5; i++ {
		wid := id("parked-warm-" + side)
		if err := start(ctx, wid); err != nil {
			return nil, err
		}
		if err := e.WaitParked(ctx, []string{wid}, 1); err != nil {
			return nil, err
		}
		if err := approve(ctx, wid); err != nil {
			return nil, err
		}
	}
	r := &Parked{Side: side, Cache: cache}
	ids, err := r.park(ctx, e, p, total, checkpoints, "parked-"+side, start)
	if err != nil {
		return nil, err
	}
	if err := p.profile("cpu", "cpu-drain-"+side+".pb.gz"); err != nil {
		return nil, err
	}
	t1 := time.Now()
	if err := Pool(ctx, 50, len(ids), func(ctx context.Context, i int) error { return approve(ctx, ids[i]) }); err != nil {
		return nil, err
	}
	r.Drain = time.Since(t1)
	if err := p.profile("cpustop", ""); err != nil {
		return nil, err
	}
	if r.After, err = p.mem(); err != nil {
		return nil, err
	}
	return r, nil
}

// park starts workflows with start, 50 at a time, up to each checkpoint
// (none beyond total), waits until they are parked and measures the
// worker's memory at the start and at every checkpoint.
func (r *Parked) park(ctx context.Context, e *Env, p *workerProc, total int, checkpoints []int, prefix string, start func(ctx context.Context, wid string) error) ([]string, error) {
	m, err := p.mem()
	if err != nil {
		return nil, err
	}
	r.Counts, r.Points = append(r.Counts, 0), append(r.Points, m)
	// Heap profiles before and with a full cache: `go tool pprof -base`
	// shows what the cached workflows hold.
	if err := p.profile("heap", "heap-"+prefix+"-0.pb.gz"); err != nil {
		return nil, err
	}
	ids := make([]string, 0, total)
	for _, cp := range checkpoints {
		if cp > total {
			break
		}
		from := len(ids)
		for i := from; i < cp; i++ {
			ids = append(ids, id(prefix))
		}
		t0 := time.Now()
		if err := Pool(ctx, 50, cp-from, func(ctx context.Context, i int) error { return start(ctx, ids[from+i]) }); err != nil {
			return nil, err
		}
		if err := e.WaitParked(ctx, ids[from:], 10); err != nil {
			return nil, err
		}
		r.Park += time.Since(t0)
		m, err := p.mem()
		if err != nil {
			return nil, err
		}
		r.Counts, r.Points = append(r.Counts, cp), append(r.Points, m)
		if cp == r.Cache {
			if err := p.profile("heap", fmt.Sprintf("heap-%s-%d.pb.gz", prefix, cp)); err != nil {
				return nil, err
			}
		}
	}
	return ids, nil
}
