package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// Tracing is a process's OpenTelemetry tracer provider, exporting over
// OTLP. A nil *Tracing is tracing switched off; its methods do nothing.
type Tracing struct {
	provider *sdktrace.TracerProvider
}

// tracing is the provider StartTracing installed, which ClientInterceptors
// traces with; nil until then.
var tracing atomic.Pointer[Tracing]

// TracingConfigured says whether getenv asks for traces: OTEL_TRACES_EXPORTER
// is otlp, or it is unset and an OTLP endpoint is set; never when
// OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is none. Another
// exporter name is an error: only OTLP is built in.
func TracingConfigured(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER is %q; Tollgate exports traces with otlp (or none)", exp)
	}
}

// otlpProtocol is the OTLP transport the OTEL_* variables choose; the
// specification's default is http/protobuf.
func otlpProtocol(getenv func(string) string) string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
	}
	return "http/protobuf"
}

// StartTracing exports traces over OTLP when the environment asks for
// them (see TracingConfigured), naming the process service unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name it. It installs the
// provider and the W3C trace-context propagator globally, so the model
// providers' HTTP clients trace too, and makes ClientInterceptors return
// the Temporal tracing interceptor. Without configuration it returns nil
// and changes nothing. Call Shutdown before exit: it flushes what is
// buffered.
func StartTracing(ctx context.Context, service string) (*Tracing, error) {
	on, err := TracingConfigured(os.Getenv)
	if err != nil || !on {
		return nil, err
	}
	var exporter sdktrace.SpanExporter
	switch p := otlpProtocol(os.Getenv); p {
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		exporter, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("the OTLP protocol is %q; Tollgate exports traces over grpc or http/protobuf", p)
	}
	if err != nil {
		return nil, fmt.Errorf("build the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		// Later options win: the environment's service name over ours.
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("describe the process for traces (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	t := &Tracing{provider: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))}
	t.install()
	return t, nil
}

// NewTracing is tracing through a provider of the caller's own (a test's
// in-memory exporter), installed as StartTracing installs its own.
func NewTracing(provider *sdktrace.TracerProvider) *Tracing {
	t := &Tracing{provider: provider}
	t.install()
	return t
}

func (t *Tracing) install() {
	otel.SetTracerProvider(t.provider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	tracing.Store(t)
}

// Shutdown flushes buffered spans and stops exporting.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	tracing.CompareAndSwap(t, nil)
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// Interceptor is the Temporal SDK's OpenTelemetry tracing interceptor with
// tracer provider tp. On a client it traces starts, updates, signals and
// queries and carries the trace to the workflow in the request's header;
// workers made from that client trace workflows and activities as
// children of it.
func Interceptor(tp trace.TracerProvider) (interceptor.Interceptor, error) {
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{Tracer: tp.Tracer("temporal-sdk-go")})
	if err != nil {
		return nil, fmt.Errorf("build the tracing interceptor: %w", err)
	}
	return i, nil
}

// ClientInterceptors are the interceptors a client of this process needs:
// the tracing interceptor once StartTracing has started tracing, else
// none.
func ClientInterceptors() []interceptor.ClientInterceptor {
	t := tracing.Load()
	if t == nil {
		return nil
	}
	i, err := Interceptor(t.provider)
	if err != nil {
		// NewTracingInterceptor fails only on options this code never sets.
		return nil
	}
	return []interceptor.ClientInterceptor{i}
}
