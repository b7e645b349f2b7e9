package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/replay"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

var record = flag.Bool("record", false, "write each path's history to "+corpusDir+"/<path>.json")

// corpusDir is the replay corpus, relative to this package.
const corpusDir = "../../../workflows/testdata/histories"

// Timeouts for waiting on the server. Generous: a shared 2-core CI machine
// can be slow, and every wait ends as soon as its condition holds.
const (
	waitTimeout   = 30 * time.Second
	pollEvery     = 25 * time.Millisecond
	resultTimeout = 60 * time.Second
)

var (
	serverOnce sync.Once
	server     *temporaltest.TestServer
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if server != nil {
		server.Stop()
	}
	os.Exit(code)
}

// sharedServer starts one in-process server for the package on first use;
// tests isolate themselves by task queue and workflow id.
func sharedServer() (hostPort, namespace string) {
	serverOnce.Do(func() {
		server = temporaltest.NewServer()
		// As worker --dev does for its embedded server.
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := tollgate.RegisterSearchAttributes(ctx, server.GetDefaultClient(), server.GetDefaultNamespace()); err != nil {
			panic(err)
		}
	})
	return server.GetFrontendHostPort(), server.GetDefaultNamespace()
}

// sdkLogger keeps SDK logs to real trouble; go test shows them only when a
// test fails.
var sdkLogger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))

var seq atomic.Int64

// env is one path's world: a task queue, a data directory, a workspace, a
// script directory, the clients and the workers.
type env struct {
	t *testing.T
	// name is the path: the corpus file name and the workflow id's prefix.
	name      string
	hostPort  string
	namespace string
	tq        string
	scripts   string
	data      string
	ws        string
	tools     []tool.Tool
	// sources are tool groups that change while the worker runs.
	sources []tool.Source
	conns   *connections.MemoryStore
	// taskTimeout, when set, is the turns' workflow task timeout. Tests
	// that stop a worker set it short: the stopping worker's last poll can
	// take a workflow task with it, and the turn waits this long (10s by
	// default) before the task goes to another worker.
	taskTimeout time.Duration
	// searchAttributes and webhooks are the workers' features.
	searchAttributes bool
	webhooks         webhook.Options
	// rules are the workers' approval rules.
	rules []policy.Rule
	// agents are the workers' named agents.
	agents []workflows.Agent

	mu      sync.Mutex
	caller  client.Client
	workers []*runningWorker
	runs    []client.WorkflowRun
}

type runningWorker struct {
	w       worker.Worker
	c       client.Client
	stopped bool
}

func newEnv(t *testing.T, name string, tools ...tool.Tool) *env {
	t.Helper()
	hostPort, namespace := sharedServer()
	return newEnvAt(t, name, hostPort, namespace, tools...)
}

func newEnvAt(t *testing.T, name, hostPort, namespace string, tools ...tool.Tool) *env {
	t.Helper()
	e := &env{
		t:         t,
		name:      name,
		hostPort:  hostPort,
		namespace: namespace,
		tq:        fmt.Sprintf("e2e-%s-%d", name, seq.Add(1)),
		scripts:   t.TempDir(),
		data:      t.TempDir(),
		ws:        t.TempDir(),
		tools:     tools,
		conns:     connections.NewMemoryStore(),
	}
	e.caller = e.dial("e2e-starter")
	t.Cleanup(e.stopAll)
	t.Cleanup(e.dumpOnFailure)
	return e
}

// dumpOnFailure logs the history of every turn of a failed test, so that
// a rare failure can be read from the CI log.
func (e *env) dumpOnFailure() {
	if !e.t.Failed() {
		return
	}
	e.mu.Lock()
	runs := append([]client.WorkflowRun(nil), e.runs...)
	e.mu.Unlock()
	for _, run := range runs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		it := e.caller.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		e.t.Logf("history of %s:", run.GetID())
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				e.t.Logf("  (%v)", err)
				break
			}
			e.t.Logf("  %3d %s %s %s", ev.GetEventId(), ev.GetEventTime().AsTime().Format("15:04:05.000"), ev.GetEventType(), eventDetail(ev))
		}
		cancel()
	}
}

// eventDetail is the part of an event that explains a failure.
func eventDetail(ev *historypb.HistoryEvent) string {
	switch {
	case ev.GetWorkflowTaskFailedEventAttributes() != nil:
		a := ev.GetWorkflowTaskFailedEventAttributes()
		return fmt.Sprintf("%s: %s", a.GetCause(), a.GetFailure().GetMessage())
	case ev.GetWorkflowTaskTimedOutEventAttributes() != nil:
		return ev.GetWorkflowTaskTimedOutEventAttributes().GetTimeoutType().String()
	case ev.GetActivityTaskFailedEventAttributes() != nil:
		return ev.GetActivityTaskFailedEventAttributes().GetFailure().GetMessage()
	case ev.GetActivityTaskTimedOutEventAttributes() != nil:
		return ev.GetActivityTaskTimedOutEventAttributes().GetFailure().GetMessage()
	case ev.GetWorkflowTaskScheduledEventAttributes() != nil:
		return ev.GetWorkflowTaskScheduledEventAttributes().GetTaskQueue().GetKind().String()
	case ev.GetWorkflowExecutionUpdateAcceptedEventAttributes() != nil:
		return ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetMeta().GetUpdateId()
	}
	return ""
}

// dial connects a new client, as a separate process would: the worker,
// the starter and an approver each have their own.
func (e *env) dial(identity string) client.Client {
	e.t.Helper()
	ext, err := clientconfig.ExternalStorage(e.data)
	require.NoError(e.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  e.hostPort,
		Namespace: e.namespace,
		// A fixed identity keeps host names out of recorded histories.
		Identity:        identity,
		Logger:          sdkLogger,
		ExternalStorage: ext,
	})
	require.NoError(e.t, err)
	e.t.Cleanup(c.Close)
	return c
}

// startWorker builds a worker through app, as the worker binary does, with
// this path's test tools beside the built-in ones.
func (e *env) startWorker() *runningWorker {
	e.t.Helper()
	return e.startWorkerWith(worker.Options{})
}

// startWorkerWith starts a worker with options of the test's own (a worker
// that polls for workflow tasks only, say).
func (e *env) startWorkerWith(opts worker.Options) *runningWorker {
	e.t.Helper()
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		DataDir:          e.data,
		Workspace:        e.ws,
		Models:           providers.Config{ScriptDir: e.scripts},
		Tools:            e.tools,
		ToolSources:      e.sources,
		Connections:      e.conns,
		SearchAttributes: e.searchAttributes,
		Webhooks:         e.webhooks,
		Rules:            e.rules,
		Agents:           e.agents,
	})
	require.NoError(e.t, err)
	e.mu.Lock()
	n := len(e.workers) + 1
	e.mu.Unlock()
	c := e.dial(fmt.Sprintf("e2e-worker-%d", n))
	// A stopped worker gives running tools this long, then cancels them;
	// the crash tests depend on a short one.
	opts.WorkerStopTimeout = 100 * time.Millisecond
	opts.Plugins = []worker.Plugin{plugin}
	w := worker.New(c, e.tq, opts)
	require.NoError(e.t, w.Start())
	rw := &runningWorker{w: w, c: c}
	e.mu.Lock()
	e.workers = append(e.workers, rw)
	e.mu.Unlock()
	return rw
}

func (e *env) stopWorker(rw *runningWorker) {
	e.mu.Lock()
	if rw.stopped {
		e.mu.Unlock()
		return
	}
	rw.stopped = true
	e.mu.Unlock()
	rw.w.Stop()
}

func (e *env) stopAll() {
	e.mu.Lock()
	ws := append([]*runningWorker(nil), e.workers...)
	e.mu.Unlock()
	for _, rw := range ws {
		e.stopWorker(rw)
	}
}

// script writes a scripted model's replies to <name>.json in the script
// directory and returns the model string. The name is relative, so no
// machine's temp path ends up in a recorded history.
func (e *env) script(replies ...scripted.Reply) string {
	e.t.Helper()
	b, err := json.MarshalIndent(scripted.Script{Replies: replies}, "", "  ")
	require.NoError(e.t, err)
	file := e.name + ".json"
	require.NoError(e.t, os.WriteFile(filepath.Join(e.scripts, file), b, 0o600))
	_, err = scripted.Parse(file, b)
	require.NoError(e.t, err, "the test's script must parse")
	return "scripted:" + file
}

func reply(text string, calls ...scripted.ToolCall) scripted.Reply {
	return scripted.Reply{Text: text, ToolCalls: calls}
}

// expecting adds checks on what the reply answers.
func expecting(r scripted.Reply, toolResults int, contains string) scripted.Reply {
	r.Expect = &scripted.Expect{ToolResults: &toolResults, Contains: contains}
	return r
}

func call(id, name string, args any) scripted.ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return scripted.ToolCall{ID: id, Name: name, Arguments: b}
}

// start starts a turn from the starter's client.
func (e *env) start(in workflows.Input) client.WorkflowRun {
	e.t.Helper()
	return e.startWorkflow(workflows.WorkflowName, in)
}

// startWorkflow starts a workflow of this path from the starter's client
// and keeps its run for the failure dump.
func (e *env) startWorkflow(name string, in any) client.WorkflowRun {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	run, err := e.caller.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                  fmt.Sprintf("%s-%d", e.name, seq.Add(1)),
		TaskQueue:           e.tq,
		WorkflowTaskTimeout: e.taskTimeout,
	}, name, in)
	require.NoError(e.t, err)
	e.track(run)
	return run
}

// track keeps a run for the failure dump.
func (e *env) track(run client.WorkflowRun) {
	e.mu.Lock()
	e.runs = append(e.runs, run)
	e.mu.Unlock()
}

// state asks the turn's state query once.
func state(ctx context.Context, c client.Client, run client.WorkflowRun) (workflows.State, error) {
	v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.StateQuery)
	if err != nil {
		return workflows.State{}, err
	}
	var s workflows.State
	err = v.Get(&s)
	return s, err
}

// waitState polls the state query until cond holds. Query errors (no
// worker yet, a worker just restarted) count as "not yet".
func (e *env) waitState(run client.WorkflowRun, what string, cond func(workflows.State) bool) workflows.State {
	e.t.Helper()
	var last workflows.State
	var lastErr error
	ok := eventually(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := state(ctx, e.caller, run)
		if err != nil {
			lastErr = err
			return false
		}
		last, lastErr = s, nil
		return cond(s)
	})
	require.True(e.t, ok, "waited %s for %s; last state %+v, last error %v", waitTimeout, what, last, lastErr)
	return last
}

// waitCard waits until the call is in the given state.
func (e *env) waitCard(run client.WorkflowRun, callID string, want results.State) workflows.State {
	e.t.Helper()
	return e.waitState(run, callID+" "+string(want), func(s workflows.State) bool {
		c, ok := card(s.Cards, callID)
		return ok && c.State == want
	})
}

// eventually polls cond until it holds or waitTimeout passes.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(waitTimeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
}

// respond sends the respond Update through c and waits for the call's new
// card, as `starter approve` and the official CLI do.
func respond(c client.Client, run client.WorkflowRun, r workflows.Response) (results.Card, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   run.GetID(),
		RunID:        run.GetRunID(),
		UpdateName:   workflows.RespondName,
		Args:         []any{r},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return results.Card{}, err
	}
	var card results.Card
	err = h.Get(ctx, &card)
	return card, err
}

// updateOnce sends the respond Update under a chosen update id and waits
// for the call's new card.
func updateOnce(ctx context.Context, c client.Client, run client.WorkflowRun, updateID string, r workflows.Response) (results.Card, error) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     updateID,
		WorkflowID:   run.GetID(),
		RunID:        run.GetRunID(),
		UpdateName:   workflows.RespondName,
		Args:         []any{r},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return results.Card{}, err
	}
	var card results.Card
	err = h.Get(ctx, &card)
	return card, err
}

// respondReliably is how a caller that must not lose an answer sends it:
// the same update id on every attempt (the server deduplicates), and
// another attempt after anything but the validator's rejection, such as a
// timeout with no worker running, or the server aborting the update
// because the workflow task carrying it went down with a stopping worker.
func respondReliably(c client.Client, run client.WorkflowRun, updateID string, r workflows.Response) (results.Card, error) {
	deadline := time.Now().Add(waitTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		card, err := updateOnce(ctx, c, run, updateID, r)
		cancel()
		var rejected *temporal.ApplicationError
		if err == nil || errors.As(err, &rejected) || time.Now().After(deadline) {
			return card, err
		}
		time.Sleep(pollEvery)
	}
}

// result waits for the turn's result. It asks in short polls: the
// in-process server now and then misses waking a history long poll when a
// workflow closes, and the poll would sit out its 20s expiry instead.
func (e *env) result(run client.WorkflowRun) workflows.Result {
	e.t.Helper()
	deadline := time.Now().Add(resultTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var res workflows.Result
		err := run.Get(ctx, &res)
		cancel()
		if err == nil {
			return res
		}
		// Anything but the turn's own failure is the poll expiring (the SDK
		// words that several ways); ask again until the deadline.
		var failed *temporal.WorkflowExecutionError
		if errors.As(err, &failed) || time.Now().After(deadline) {
			require.NoError(e.t, err, "the turn did not end within %s", resultTimeout)
		}
	}
}

// record writes the run's history to the corpus when -record is set. Every
// recorded payload must be inline: the replay test reads the corpus
// without a payload store.
func (e *env) record(run client.WorkflowRun) {
	e.t.Helper()
	e.recordAs(run, e.name)
}

// recordAs is record under another name than the path's, for a second
// workflow of one path (a called agent's turn).
func (e *env) recordAs(run client.WorkflowRun, name string) {
	e.t.Helper()
	if !*record {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var buf bytes.Buffer
	require.NoError(e.t, replay.Export(ctx, e.caller, run.GetID(), run.GetRunID(), &buf))
	out := buf.Bytes()
	require.NotContains(e.t, string(out), "externalPayloads", "a corpus history must not refer to externally stored payloads")
	// Sticky task queues are named <host name>:<uuid> by the SDK; keep the
	// recording machine's name out of the corpus. Replay ignores them.
	if host, err := os.Hostname(); err == nil && host != "" {
		out = bytes.ReplaceAll(out, []byte(`"name": "`+host+`:`), []byte(`"name": "recorder:`))
	}
	require.NoError(e.t, os.MkdirAll(corpusDir, 0o755))
	require.NoError(e.t, os.WriteFile(filepath.Join(corpusDir, name+".json"), out, 0o644))
}

// history returns the run's events, for assertions on what the server saw.
func (e *env) history(run client.WorkflowRun) []*historypb.HistoryEvent {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	it := e.caller.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(e.t, err)
		out = append(out, ev)
	}
	return out
}

func countEvents(events []*historypb.HistoryEvent, typ enumspb.EventType) int {
	n := 0
	for _, ev := range events {
		if ev.GetEventType() == typ {
			n++
		}
	}
	return n
}

func card(cards []results.Card, id string) (results.Card, bool) {
	for _, c := range cards {
		if c.CallID == id {
			return c, true
		}
	}
	return results.Card{}, false
}

func mustCard(t *testing.T, cards []results.Card, id string) results.Card {
	t.Helper()
	c, ok := card(cards, id)
	require.True(t, ok, "no card %s in %v", id, cards)
	return c
}

// toolTexts is every tool message as "<call id> error=<bool> <text>".
func toolTexts(ms []results.Message) []string {
	var out []string
	for _, m := range ms {
		if m.Role == results.RoleTool {
			out = append(out, fmt.Sprintf("%s error=%v %s", m.ToolCallID, m.IsError, m.Text()))
		}
	}
	return out
}

func errorText(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}

// outputText is the text parts of a succeeded card.
func outputText(c results.Card) string {
	if c.Output == nil {
		return ""
	}
	return results.Message{Parts: c.Output.Parts}.Text()
}
