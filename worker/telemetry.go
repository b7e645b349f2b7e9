package main

import (
	"context"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate/internal/telemetry"
)

// serviceName names the worker in traces unless OTEL_SERVICE_NAME does.
const serviceName = "tollgate-worker"

// observability is what the worker reports to its operators: the
// metrics endpoint (--metrics) and traces (OTEL_* variables).
type observability struct {
	// metrics is the handler for the client options; nil without
	// --metrics.
	metrics  client.MetricsHandler
	endpoint *telemetry.Endpoint
	meters   *telemetry.Metrics
	tracing  *telemetry.Tracing
	logger   *slog.Logger
}

// startTelemetry starts tracing when the OTEL_* variables ask for it and
// serves /metrics on addr when it is set. Both happen before the client is
// dialled, so the client and its workers trace and count from the start.
func startTelemetry(ctx context.Context, addr string, logger *slog.Logger) (*observability, error) {
	o := &observability{logger: logger}
	var err error
	if o.tracing, err = telemetry.StartTracing(ctx, serviceName); err != nil {
		return nil, err
	}
	if o.tracing != nil {
		logger.Info("Exporting traces over OTLP (OTEL_* variables)")
	}
	if addr == "" {
		return o, nil
	}
	if o.meters, err = telemetry.NewMetrics(); err != nil {
		o.Stop()
		return nil, err
	}
	if o.endpoint, err = telemetry.Serve(addr, o.meters, logger); err != nil {
		o.Stop()
		return nil, err
	}
	o.metrics = o.meters.Handler
	logger.Info("Serving metrics", "url", o.endpoint.URL)
	return o, nil
}

// Stop closes the endpoint and flushes buffered spans.
func (o *observability) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if o.endpoint != nil {
		o.endpoint.Stop()
	}
	if o.meters != nil {
		if err := o.meters.Shutdown(ctx); err != nil {
			o.logger.Warn("Metrics did not stop cleanly", "error", err)
		}
	}
	if err := o.tracing.Shutdown(ctx); err != nil {
		o.logger.Warn("Traces not flushed", "error", err)
	}
}
