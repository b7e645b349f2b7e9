// Package telemetry wires a Tollgate process to its operators: Prometheus
// metrics (the Temporal SDK's own and Tollgate's tollgate_* series, both
// through the SDK's OpenTelemetry metrics handler) and OpenTelemetry
// traces exported over OTLP as the standard OTEL_* variables say. The
// series themselves are named in package metrics.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"

	"github.com/tollgate-dev/tollgate/metrics"
)

// MetricsAddrEnv names the worker's metrics address in the environment.
const MetricsAddrEnv = "TOLLGATE_METRICS_ADDR"

// MetricsPath is where the endpoint serves the Prometheus text format.
const MetricsPath = "/metrics"

// Histogram bucket boundaries, in seconds. OpenTelemetry's defaults (0 to
// 10000 in coarse steps) put every RPC latency in the first bucket.
var (
	// latencyBuckets suit RPCs, workflow tasks and tool runs.
	latencyBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	// waitBuckets suit people: seconds to a week.
	waitBuckets = []float64{1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600}
)

// Metrics is a Prometheus registry fed through OpenTelemetry, and the
// Temporal metrics handler that writes to it. Set Handler as
// client.Options.MetricsHandler: the SDK's own metrics and every
// tollgate_* series recorded by workflows and activities of that client's
// workers land in the registry.
type Metrics struct {
	Handler  client.MetricsHandler
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
}

// NewMetrics builds the registry with the Go runtime and process
// collectors beside the Temporal and Tollgate series.
func NewMetrics() (*Metrics, error) {
	registry := prometheus.NewRegistry()
	if err := registry.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("register the Go runtime metrics: %w", err)
	}
	if err := registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("register the process metrics: %w", err)
	}
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("build the Prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithView(histogramBuckets))
	handler := temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter: provider.Meter("tollgate"),
		// Counters only ever grow; as monotonic sums Prometheus sees them
		// as counters (_total) rather than gauges.
		UseMonotonicCounters: true,
		// The default panics. A metric that cannot be recorded (a name
		// clash) must not take a workflow task down with it.
		OnError: func(err error) { slog.Warn("Metric not recorded", "error", err) },
	})
	return &Metrics{Handler: handler, registry: registry, provider: provider}, nil
}

// histogramBuckets gives every timer buckets that fit what it times.
func histogramBuckets(inst sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	if inst.Kind != sdkmetric.InstrumentKindHistogram {
		return sdkmetric.Stream{}, false
	}
	bounds := latencyBuckets
	if inst.Name == metrics.Wait {
		bounds = waitBuckets
	}
	return sdkmetric.Stream{
		Name:        inst.Name,
		Description: inst.Description,
		Unit:        inst.Unit,
		Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: bounds},
	}, true
}

// HTTPHandler serves the registry in the Prometheus text format.
func (m *Metrics) HTTPHandler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Shutdown stops the meter provider.
func (m *Metrics) Shutdown(ctx context.Context) error {
	return m.provider.Shutdown(ctx)
}

// Endpoint is a running metrics endpoint.
type Endpoint struct {
	// URL is the scrape URL, http://host:port/metrics.
	URL    string
	server *http.Server
	done   chan struct{}
}

// Serve listens on addr and serves m at MetricsPath until Stop. The
// endpoint has no authentication: bind it to loopback or a network only
// the scraper reaches.
func Serve(addr string, m *Metrics, logger *slog.Logger) (*Endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, m.HTTPHandler())
	e := &Endpoint{
		URL:    "http://" + ln.Addr().String() + MetricsPath,
		server: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		done:   make(chan struct{}),
	}
	go func() {
		defer close(e.done)
		if err := e.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("Metrics endpoint stopped", "error", err)
		}
	}()
	return e, nil
}

// Stop closes the endpoint and waits for it.
func (e *Endpoint) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.server.Shutdown(ctx)
	<-e.done
}
