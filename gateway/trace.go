package gateway

import (
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the gateway's spans' instrumentation scope.
const tracerName = "github.com/tollgate-dev/tollgate/gateway"

// traced wraps one request in a server span, the parent of the Temporal
// calls it makes (the SDK's tracing interceptor reads the request's
// context), under the caller's trace when it sends traceparent.
//
// The span is named and labelled by route pattern, never by path or
// query: one-click link and connect tokens travel in paths, OAuth codes
// and states in queries, and a trace backend is no place for them.
// Without a tracer provider (tracing off) the span is a no-op.
func (s *Server) traced(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request)) {
	_, pattern := s.mux.Handler(r)
	if pattern == "" {
		pattern = "unmatched"
	}
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := otel.GetTracerProvider().Tracer(tracerName).Start(ctx, r.Method+" "+pattern,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", pattern),
		))
	defer span.End()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	serve(rec, r.WithContext(ctx))
	span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
	if rec.status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(rec.status))
	}
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
