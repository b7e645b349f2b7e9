// Package bench measures what Tollgate's durability costs against bare
// Temporal on the same embedded server in the same run: tool-call
// overhead, resume latency, parked turns, throughput, history cost, and
// micro benchmarks of the results codec. `go run ./cmd/bench` runs
// the whole suite and writes docs/bench-results.md; `go test -bench . ./internal/bench/`
// runs the standard Go benchmarks.
package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/dynamicconfig"
	"google.golang.org/grpc"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
	"github.com/tollgate-dev/tollgate/internal/devserver"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/storage/payloadstore"
	"github.com/tollgate-dev/tollgate/storage/transcript"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Task queues of the two sides. Both are served by workers with the same
// options in the same process, against the same server.
const (
	TollgateQueue = "bench-tollgate"
	BareQueue     = "bench-bare"
)

// Options configure an Env.
type Options struct {
	// DynamicConfig is given to the embedded server; nil means the
	// server's defaults.
	DynamicConfig dynamicconfig.StaticClient
	// DataDir holds the payload store, transcripts, scripts and the
	// workspace; empty means a fresh temporary directory removed on Close.
	DataDir string
	// NoWorkers leaves the in-process workers out (the parked-turn
	// benchmark runs its workers in subprocesses).
	NoWorkers bool
	// SQLiteFile keeps the server's database in a file in the data
	// directory, as `worker --dev` does, instead of in memory.
	SQLiteFile bool
	// Events, when set, is where the Tollgate worker publishes turns'
	// live events: benchmark 1 with streaming on.
	Events stream.Publisher
	// Rules are the Tollgate worker's approval rules: benchmark 1 with a
	// policy that decides every call.
	Rules []policy.Rule
	// Variants are more Tollgate workers on the same server and data
	// directory, each on a task queue of its own.
	Variants []Variant
}

// Variant is a Tollgate worker configured otherwise than Start's own
// (other live events, other rules), on a task queue of its own, so that
// the two are measured against one server and one bare loop.
type Variant struct {
	Queue  string
	Events stream.Publisher
	Rules  []policy.Rule
}

// Env is one embedded server, one client and a worker for each side.
type Env struct {
	Server  *devserver.Server
	Client  client.Client
	DataDir string
	// Transcripts is the store Tollgate's worker writes, for size stats.
	Transcripts *transcript.Store
	Payloads    *payloadstore.Driver
	// Stamps records when respond updates were accepted and when
	// activities started, keyed by workflow id.
	Stamps *Stamps
	// Profiles, when set, is a directory for the subprocess workers' CPU
	// and heap profiles (benchmark 3) and benchmark 1's CPU profile.
	Profiles string

	ownDir  bool
	workers []worker.Worker
	scripts sync.Map
}

// Start starts the server, the client and both workers.
func Start(opts Options) (*Env, error) {
	e := &Env{DataDir: opts.DataDir, Stamps: NewStamps()}
	if e.DataDir == "" {
		dir, err := os.MkdirTemp("", "tollgate-bench-")
		if err != nil {
			return nil, err
		}
		e.DataDir, e.ownDir = dir, true
	}
	port, err := devserver.FreePort()
	if err != nil {
		return nil, err
	}
	so := devserver.Options{Port: port, DynamicConfig: opts.DynamicConfig}
	if opts.SQLiteFile {
		so.DatabasePath = filepath.Join(e.DataDir, "temporal.db")
	}
	e.Server, err = devserver.Start(so)
	if err != nil {
		e.Close()
		return nil, err
	}
	e.Client, err = Dial(e.Server.Address(), e.DataDir)
	if err != nil {
		e.Close()
		return nil, err
	}
	if e.Payloads, err = payloadstore.New(datadir.Payloads(e.DataDir)); err != nil {
		e.Close()
		return nil, err
	}
	plugin, err := newPlugin(e.DataDir, opts)
	if err != nil {
		e.Close()
		return nil, err
	}
	if e.Transcripts, err = transcript.NewStore(filepath.Join(e.DataDir, "transcripts")); err != nil {
		e.Close()
		return nil, err
	}
	if !opts.NoWorkers {
		bw := worker.New(e.Client, BareQueue, WorkerOptions(e.Stamps))
		RegisterBare(bw)
		all := []worker.Worker{e.tollgateWorker(TollgateQueue, plugin), bw}
		for _, v := range opts.Variants {
			vp, err := newPlugin(e.DataDir, Options{Events: v.Events, Rules: v.Rules})
			if err != nil {
				e.Close()
				return nil, err
			}
			all = append(all, e.tollgateWorker(v.Queue, vp))
		}
		for _, w := range all {
			if err := w.Start(); err != nil {
				e.Close()
				return nil, fmt.Errorf("start worker: %w", err)
			}
			e.workers = append(e.workers, w)
		}
	}
	return e, nil
}

// tollgateWorker is a worker on queue with plugin, and the options every
// worker of both sides has.
func (e *Env) tollgateWorker(queue string, plugin *tollgate.Plugin) worker.Worker {
	o := WorkerOptions(e.Stamps)
	o.Plugins = []worker.Plugin{plugin}
	return worker.New(e.Client, queue, o)
}

// Dial connects a client configured as the worker and starter configure
// theirs (external payload storage in the data directory).
func Dial(address, dataDir string) (client.Client, error) {
	opts, err := clientconfig.ClientOptions(clientconfig.Options{DataDir: dataDir, Address: address, Namespace: "default"})
	if err != nil {
		return nil, err
	}
	opts.Logger = quietLogger()
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(countRPCs))
	var c client.Client
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err = client.Dial(opts)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("connect to the embedded server: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c, nil
}

// RPCs counts the client's calls to the server, the workers' polls
// included.
var RPCs atomic.Int64

func countRPCs(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	RPCs.Add(1)
	return invoker(ctx, method, req, reply, cc, opts...)
}

func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// NewPlugin enables Tollgate as the worker binary does, without the
// built-in tools and with the benchmark's tools.
func NewPlugin(dataDir string) (*tollgate.Plugin, error) {
	return newPlugin(dataDir, Options{})
}

func newPlugin(dataDir string, opts Options) (*tollgate.Plugin, error) {
	return tollgate.NewPlugin(tollgate.Options{
		DataDir:    dataDir,
		Workspace:  workspaceDir(dataDir),
		Models:     providers.Config{ScriptDir: filepath.Join(dataDir, "scripts")},
		Tools:      Tools(),
		NoBuiltins: true,
		Events:     opts.Events,
		Rules:      opts.Rules,
	})
}

// WorkerOptions are the options of every worker on both sides: SDK
// defaults plus the interceptor that timestamps update acceptance and
// activity starts.
func WorkerOptions(stamps *Stamps) worker.Options {
	return worker.Options{
		Interceptors: []interceptor.WorkerInterceptor{&stampInterceptor{stamps: stamps}},
	}
}

// Close stops everything and removes a temporary data directory.
func (e *Env) Close() {
	for _, w := range e.workers {
		w.Stop()
	}
	if e.Client != nil {
		e.Client.Close()
	}
	if e.Server != nil {
		_ = e.Server.Stop()
	}
	if e.ownDir {
		_ = os.RemoveAll(e.DataDir)
		_ = os.RemoveAll(workspaceDir(e.DataDir))
	}
}

// workspaceDir sits beside the data directory: a worker refuses a
// workspace that would expose its data (tokens, transcripts) to the file
// tools.
func workspaceDir(dataDir string) string {
	return filepath.Clean(dataDir) + "-workspace"
}

// Wait waits until the workflow has closed and decodes its result into
// valuePtr (nil to ignore it). A client's usual wait, a long poll on the
// close event from the start, sometimes misses the close on the embedded
// server and then lasts the whole long-poll interval, 20 s (see the
// report). So the worker stamps the moment the workflow function returns
// (done is the armed DoneKey channel), and only then does Wait ask for
// the result: the close is then the single event left to come, which the
// long poll does not miss.
func (e *Env) Wait(ctx context.Context, wid string, done <-chan time.Time, valuePtr any) error {
	return WaitClosed(ctx, e.Client, wid, done, valuePtr)
}

// WaitClosed is Env.Wait for any client.
func WaitClosed(ctx context.Context, c client.Client, wid string, done <-chan time.Time, valuePtr any) error {
	return waitClosedWithin(ctx, c, wid, done, valuePtr, 2*time.Minute)
}

// waitClosedWithin is WaitClosed for a workflow that may take up to limit.
func waitClosedWithin(ctx context.Context, c client.Client, wid string, done <-chan time.Time, valuePtr any, limit time.Duration) error {
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(limit):
		return fmt.Errorf("%s: the workflow did not finish within %v", wid, limit)
	}
	// Belt and braces: a long poll that still misses the close is cut
	// after a second and asked again, which then finds it closed.
	for {
		gctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.GetWorkflow(gctx, wid, "").Get(gctx, valuePtr)
		cancel()
		if err == nil || ctx.Err() != nil || gctx.Err() == nil {
			return err
		}
		Repolls.Add(1)
	}
}

// Repolls counts result waits that had to be asked again (see WaitClosed).
var Repolls atomic.Int64

// StartTurn starts an AgentTurn on the Tollgate queue.
func (e *Env) StartTurn(ctx context.Context, id string, in workflows.Input) (client.WorkflowRun, error) {
	return e.startTurnOn(ctx, TollgateQueue, id, in)
}

// startTurnOn starts a turn on a Tollgate worker's queue: Start's own
// (TollgateQueue) or a variant's.
func (e *Env) startTurnOn(ctx context.Context, queue, id string, in workflows.Input) (client.WorkflowRun, error) {
	return e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, workflows.WorkflowName, Unique(in, id))
}

// Unique makes the turn's conversation its own: the transcript store is
// content-addressed, so turns that all said the same thing would share
// their stored chunks and skip the writes (and syncs) a real turn pays.
func Unique(in workflows.Input, id string) workflows.Input {
	in.Prompt = fmt.Sprintf("%s (%s)", in.Prompt, id)
	return in
}

// StartBare starts a bare workflow on the bare queue.
func (e *Env) StartBare(ctx context.Context, id string, wf any, args ...any) (client.WorkflowRun, error) {
	return e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: BareQueue}, wf, args...)
}

// Stamps hands out timestamps taken inside the worker to whoever armed
// the key.
type Stamps struct {
	mu sync.Mutex
	m  map[string]chan time.Time
	// sink, when set, also receives every stamp (a subprocess worker
	// forwards them to the driver).
	sink func(key string, t time.Time)
}

func NewStamps() *Stamps { return &Stamps{m: map[string]chan time.Time{}} }

// Arm returns the channel the next stamps for key arrive on.
func (s *Stamps) Arm(key string) <-chan time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan time.Time, 8)
	s.m[key] = ch
	return ch
}

// Disarm forgets key.
func (s *Stamps) Disarm(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

func (s *Stamps) fire(key string, t time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	ch := s.m[key]
	s.mu.Unlock()
	if s.sink != nil {
		s.sink(key, t)
	}
	if ch != nil {
		select {
		case ch <- t:
		default:
		}
	}
}

// AcceptKey, StartKey and DoneKey name the stamps of a workflow's
// respond update acceptance, of its activities' starts, and of its
// workflow function returning.
func AcceptKey(workflowID string) string { return "accept/" + workflowID }
func StartKey(workflowID string) string  { return "start/" + workflowID }
func DoneKey(workflowID string) string   { return "done/" + workflowID }

// stampInterceptor stamps, on both sides alike, the moment a worker
// accepted a respond update (its validator passed) and the moment an
// activity started executing.
type stampInterceptor struct {
	interceptor.WorkerInterceptorBase
	stamps *Stamps
}

func (i *stampInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &stampWorkflow{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, stamps: i.stamps}
}

func (i *stampInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &stampActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, stamps: i.stamps}
}

type stampWorkflow struct {
	interceptor.WorkflowInboundInterceptorBase
	stamps *Stamps
}

func (w *stampWorkflow) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	res, err := w.Next.ExecuteWorkflow(ctx, in)
	// A run that continues as new has not finished the workflow: stamping
	// it would start the result wait's repolling (WaitClosed) at the end
	// of a long turn's first run, a history read a second on the server
	// for as long as the turn then runs.
	if !workflow.IsReplaying(ctx) && !workflow.IsContinueAsNewError(err) {
		w.stamps.fire(DoneKey(workflow.GetInfo(ctx).WorkflowExecution.ID), time.Now())
	}
	return res, err
}

func (w *stampWorkflow) ValidateUpdate(ctx workflow.Context, in *interceptor.UpdateInput) error {
	err := w.Next.ValidateUpdate(ctx, in)
	if err == nil && !workflow.IsReplaying(ctx) {
		// Measurement only: never feeds back into workflow state.
		w.stamps.fire(AcceptKey(workflow.GetInfo(ctx).WorkflowExecution.ID), time.Now())
	}
	return err
}

type stampActivity struct {
	interceptor.ActivityInboundInterceptorBase
	stamps *Stamps
}

func (a *stampActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	t := time.Now()
	a.stamps.fire(StartKey(activityWorkflowID(ctx)), t)
	res, err := a.Next.ExecuteActivity(ctx, in)
	ActivityTimes.add(activity.GetInfo(ctx).ActivityType.Name, time.Since(t))
	return res, err
}

// ActivityTimes sums the time spent inside each activity type's function
// (in-process workers only).
var ActivityTimes = &activityTimes{m: map[string]*activityTime{}}

type activityTimes struct {
	mu sync.Mutex
	m  map[string]*activityTime
}

type activityTime struct {
	n     int
	total time.Duration
}

func (a *activityTimes) add(name string, d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.m[name]
	if t == nil {
		t = &activityTime{}
		a.m[name] = t
	}
	t.n++
	t.total += d
}

// Reset forgets everything so far.
func (a *activityTimes) Reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.m = map[string]*activityTime{}
}

// Mean is the mean time inside an activity type and how many ran.
func (a *activityTimes) Mean(name string) (time.Duration, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.m[name]
	if t == nil || t.n == 0 {
		return 0, 0
	}
	return t.total / time.Duration(t.n), t.n
}
