package telemetry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate-dev/tollgate/metrics"
)

func TestTracingIsOffUnlessTheEnvironmentAsks(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
		err  string
	}{
		{name: "nothing set"},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, on: true},
		{name: "exporter otlp", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{name: "exporter none wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}},
		{name: "sdk disabled wins", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "other exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "otlp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on, err := TracingConfigured(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.on, on)
		})
	}
}

func TestOTLPProtocolDefaultsToHTTP(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	require.Equal(t, "http/protobuf", otlpProtocol(get))
	env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
	require.Equal(t, "grpc", otlpProtocol(get))
	env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
	require.Equal(t, "http/protobuf", otlpProtocol(get), "the traces-specific variable wins")
}

func TestStartTracingWithoutConfigurationChangesNothing(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	tr, err := StartTracing(context.Background(), "test")
	require.NoError(t, err)
	require.Nil(t, tr)
	require.Empty(t, ClientInterceptors())
	require.NoError(t, tr.Shutdown(context.Background()), "a nil Tracing shuts down quietly")
}

func TestClientInterceptorsFollowTheInstalledTracing(t *testing.T) {
	tr := NewTracing(sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter())))
	require.Len(t, ClientInterceptors(), 1)
	require.NoError(t, tr.Shutdown(context.Background()))
	require.Empty(t, ClientInterceptors())
}

func TestTheEndpointServesTollgateAndSDKSeriesInPrometheusText(t *testing.T) {
	m, err := NewMetrics()
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	h := m.Handler.WithTags(map[string]string{"workflow_type": "AgentTurn"})
	metrics.Count(h, metrics.Turns, 2, map[string]string{metrics.Status: "completed"})
	metrics.Time(h, metrics.Wait, 90*time.Second, map[string]string{metrics.WaitKind: "pending_approval"})
	metrics.Time(h, metrics.ToolRun, 30*time.Millisecond, map[string]string{metrics.Tool: "read_file"})

	e, err := Serve("127.0.0.1:0", m, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(e.Stop)
	require.True(t, strings.HasPrefix(e.URL, "http://127.0.0.1:"))
	resp, err := http.Get(e.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	text := string(body)

	require.Contains(t, text, "# TYPE tollgate_turns_total counter")
	require.Contains(t, text, `tollgate_turns_total{status="completed",workflow_type="AgentTurn"} 2`)
	require.Contains(t, text, "# TYPE tollgate_wait_seconds histogram")
	// People are slow: the wait histogram counts in minutes and hours.
	require.Contains(t, text, `tollgate_wait_seconds_bucket{kind="pending_approval",workflow_type="AgentTurn",le="60"} 0`)
	require.Contains(t, text, `tollgate_wait_seconds_bucket{kind="pending_approval",workflow_type="AgentTurn",le="300"} 1`)
	// Tools are fast: their histogram starts at a millisecond.
	require.Contains(t, text, `tollgate_tool_run_seconds_bucket{tool="read_file",workflow_type="AgentTurn",le="0.025"} 0`)
	require.Contains(t, text, `tollgate_tool_run_seconds_bucket{tool="read_file",workflow_type="AgentTurn",le="0.05"} 1`)
	require.Contains(t, text, "go_goroutines")
	require.NotContains(t, text, "otel_scope_name", "no OpenTelemetry scope labels on every series")
}
