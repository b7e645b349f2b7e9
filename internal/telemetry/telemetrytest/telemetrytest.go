// Package telemetrytest records spans for tests.
package telemetrytest

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Capture makes, for the rest of the test, the global tracer provider one
// that records every span as it ends, and the global propagator W3C trace
// context: what code that traces through the globals (HTTP clients and
// servers) uses. Tests that call it must not run in parallel.
func Capture(t testing.TB) (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
		_ = tp.Shutdown(context.Background())
	})
	return exp, tp
}

// Attr is the value of the span's attribute key, "" if it has none.
func Attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}

// Text is everything a span says in words, its name and every attribute
// as key=value, for checking what it must not say.
func Text(s tracetest.SpanStub) string {
	parts := []string{s.Name}
	for _, a := range s.Attributes {
		parts = append(parts, string(a.Key)+"="+a.Value.Emit())
	}
	return strings.Join(parts, " ")
}

// Names lists the spans' names, for failure messages.
func Names(spans tracetest.SpanStubs) string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}
