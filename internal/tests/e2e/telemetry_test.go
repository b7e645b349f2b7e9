package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/internal/telemetry/telemetrytest"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// dialObserved connects a client as the worker binary does with
// --metrics and OTEL_* set: the metrics handler (nil: none) counting the
// payload store too, and the interceptors (the tracing one).
func (e *env) dialObserved(identity string, h client.MetricsHandler, interceptors ...interceptor.ClientInterceptor) client.Client {
	e.t.Helper()
	ext, err := clientconfig.ExternalStorage(e.data)
	require.NoError(e.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort:        e.hostPort,
		Namespace:       e.namespace,
		Identity:        identity,
		Logger:          sdkLogger,
		ExternalStorage: metrics.CountStorage(ext, h),
		MetricsHandler:  h,
		Interceptors:    interceptors,
	})
	require.NoError(e.t, err)
	e.t.Cleanup(c.Close)
	return c
}

// startObservedWorker starts a worker on c with this path's tools.
func (e *env) startObservedWorker(c client.Client) {
	e.t.Helper()
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		DataDir: e.data, Workspace: e.ws, Models: providers.Config{ScriptDir: e.scripts}, Tools: e.tools, Connections: e.conns,
	})
	require.NoError(e.t, err)
	w := worker.New(c, e.tq, worker.Options{Plugins: []worker.Plugin{plugin}, WorkerStopTimeout: 100 * time.Millisecond})
	require.NoError(e.t, w.Start())
	e.t.Cleanup(w.Stop)
}

// runDemo runs the starter's demo turn from caller: approves its write
// and answers its question.
func (e *env) runDemo(caller client.Client) client.WorkflowRun {
	e.t.Helper()
	notes, err := os.ReadFile("../../../examples/notes.txt")
	require.NoError(e.t, err)
	require.NoError(e.t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), notes, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	run, err := caller.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("%s-%d", e.name, seq.Add(1)), TaskQueue: e.tq}, workflows.WorkflowName, workflows.Input{
		Prompt: "Summarise notes.txt into summary.md",
		Model:  "scripted:demo",
		Tools:  []string{"read_file", "write_file", "ask_user"},
	})
	require.NoError(e.t, err)
	e.track(run)
	e.waitCard(run, "call_write_summary", results.StatePendingApproval)
	_, err = respond(caller, run, workflows.Response{CallID: "call_write_summary", Decision: results.DecisionApprove, By: "alice"})
	require.NoError(e.t, err)
	e.waitCard(run, "call_ask_tone", results.StateWaitingAnswer)
	_, err = respond(caller, run, workflows.Response{CallID: "call_ask_tone", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"friendly"`), By: "alice"})
	require.NoError(e.t, err)
	require.Equal(e.t, workflows.StatusCompleted, e.result(run).Status)
	return run
}

// After the demo turn, and a turn whose payloads are too large for
// history, the worker's /metrics shows every tollgate_* series counted,
// beside the SDK's own.
func TestMetricsEndpointCountsADemoTurn(t *testing.T) {
	big := strings.Repeat("0123456789abcdef\n", 5<<10) // 85 KiB: over MaxInlineRaw
	dump := tool.MustFunc(tool.Spec{Name: "dump", Description: "Returns a large output.", Idempotent: true},
		func(context.Context, tool.Call, struct{}) (results.Outcome, error) {
			out := results.SucceedText("dumped")
			out.Success.Raw = big
			return out, nil
		})
	e := newEnv(t, "metrics", dump)
	m, err := telemetry.NewMetrics()
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	ep, err := telemetry.Serve("127.0.0.1:0", m, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(ep.Stop)
	e.startObservedWorker(e.dialObserved("e2e-worker-metrics", m.Handler))

	e.runDemo(e.caller)
	// A prompt over the payload store's threshold goes to the store when
	// the worker sends the conversation to CallModel.
	run := e.start(workflows.Input{
		Prompt: "dump it " + strings.Repeat("x", 140<<10),
		Model:  e.script(reply("", call("d1", "dump", map[string]any{})), reply("done")),
		Tools:  []string{"dump"},
	})
	require.Equal(t, workflows.StatusCompleted, e.result(run).Status)

	series := scrape(t, ep.URL)
	for _, want := range []string{
		`tollgate_turns_total{status="completed"}`,
		`tollgate_tool_calls_total{outcome="success",tool="read_file"}`,
		`tollgate_tool_calls_total{outcome="success",tool="write_file"}`,
		`tollgate_tool_calls_total{outcome="success",tool="ask_user"}`,
		`tollgate_tool_calls_total{outcome="success",tool="dump"}`,
		`tollgate_wait_seconds_count{kind="pending_approval"}`,
		`tollgate_wait_seconds_count{kind="waiting_answer"}`,
		`tollgate_decisions_total{decision="approve"}`,
		`tollgate_decisions_total{decision="answer"}`,
		`tollgate_model_calls_total{model="demo",outcome="ok",provider="scripted"}`,
		`tollgate_model_tokens_total{direction="input",model="demo",provider="scripted"}`,
		`tollgate_model_tokens_total{direction="output",model="demo",provider="scripted"}`,
		`tollgate_tool_run_seconds_count{tool="read_file"}`,
		`tollgate_tool_run_seconds_count{tool="write_file"}`,
		`tollgate_payload_store_bytes_total{store="output"}`,
		`tollgate_payload_store_bytes_total{store="history"}`,
		// The SDK's own, through the same handler.
		`temporal_workflow_completed_total{}`,
		`temporal_activity_execution_latency_seconds_count{}`,
	} {
		require.Greater(t, series[want], 0.0, "%s in the scrape:\n%s", want, keysOf(series))
	}
	require.Equal(t, 2.0, series[`tollgate_turns_total{status="completed"}`])
	require.Equal(t, float64(len(big)), series[`tollgate_payload_store_bytes_total{store="output"}`])
}

// One trace runs from the client's start through the workflow to the
// tool runs and model calls: the same trace id on the start's client span
// and on every RunTool and CallModel span of the turn.
func TestOneTraceFromStartToToolRun(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracing, err := telemetry.Interceptor(tp)
	require.NoError(t, err)

	e := newEnv(t, "traces")
	// The worker and the starter are separate processes: the trace
	// crosses in the request headers, not in memory.
	e.startObservedWorker(e.dialObserved("e2e-worker-traces", nil, tracing))
	starter := e.dialObserved("e2e-starter-traces", nil, tracing)
	run := e.runDemo(starter)

	spans := exp.GetSpans()
	var start *tracetest.SpanStub
	for i, s := range spans {
		if s.Name == "StartWorkflow:"+workflows.WorkflowName && telemetrytest.Attr(s, "temporalWorkflowID") == run.GetID() {
			start = &spans[i]
		}
	}
	require.NotNil(t, start, "the client's start span, among %s", telemetrytest.Names(spans))
	require.Equal(t, trace.SpanKindClient, start.SpanKind)
	id := start.SpanContext.TraceID()

	byName := map[string]int{}
	for _, s := range spans {
		if s.SpanContext.TraceID() == id {
			byName[s.Name]++
		}
	}
	require.Equal(t, 1, byName["RunWorkflow:"+workflows.WorkflowName], "the workflow continues the start's trace: %v", byName)
	// read_file may run as a local activity (RunLocalTool), the rest as
	// activities.
	require.Equal(t, 4, byName["RunActivity:RunTool"]+byName["RunActivity:RunLocalTool"], "read_file, the approved write_file, ask_user asking and answered: %v", byName)
	require.Equal(t, 4, byName["RunActivity:CallModel"], "every model call: %v", byName)
}

// scrape reads the endpoint's text format into value by series, the
// series written name{labels} with the SDK's namespace, task_queue,
// workflow_type and activity_type labels dropped and the rest in the
// exporter's (sorted) order; values of series that differ only in dropped
// labels are summed.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		require.NoError(t, err, line)
		out[seriesKey(line[:sp])] += v
	}
	return out
}

var sdkLabels = map[string]bool{"namespace": true, "task_queue": true, "workflow_type": true, "activity_type": true, "worker_type": true, "client_name": true, "operation": true}

func seriesKey(s string) string {
	name, labels, ok := strings.Cut(s, "{")
	if !ok {
		return name + "{}"
	}
	labels = strings.TrimSuffix(labels, "}")
	var keep []string
	for _, l := range splitLabels(labels) {
		k, _, _ := strings.Cut(l, "=")
		if !sdkLabels[k] {
			keep = append(keep, l)
		}
	}
	return name + "{" + strings.Join(keep, ",") + "}"
}

// splitLabels splits k="v",k2="v2" at the commas between labels.
func splitLabels(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func keysOf(m map[string]float64) string {
	var b strings.Builder
	for k, v := range m {
		if strings.HasPrefix(k, "tollgate_") || strings.HasPrefix(k, "temporal_workflow") {
			fmt.Fprintf(&b, "%s %v\n", k, v)
		}
	}
	return b.String()
}
