package providers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate/internal/telemetry/telemetrytest"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

// A provider's HTTP request is a client span under the caller's span, and
// the trace context travels in its traceparent header.
func TestProviderRequestsAreTracedUnderTheCallersSpan(t *testing.T) {
	exp, tp := telemetrytest.Capture(t)

	var traceparent string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparent = r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hello"}}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
	}))
	t.Cleanup(srv.Close)

	r := NewRouter(Config{OpenAIBaseURL: srv.URL, OpenAIKey: "test-key"})
	p, name, err := r.Resolve("openai:m")
	require.NoError(t, err)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "RunActivity:CallModel")
	resp, err := p.Complete(ctx, model.Request{Model: name, Messages: []results.Message{results.UserText("hi")}})
	parent.End()
	require.NoError(t, err)
	require.Equal(t, "hello", resp.Message.Text())

	var client *tracetest.SpanStub
	spans := exp.GetSpans()
	for i := range spans {
		if spans[i].SpanKind == trace.SpanKindClient {
			client = &spans[i]
		}
	}
	require.NotNil(t, client, "the HTTP call made a client span: %v", spans)
	require.Equal(t, parent.SpanContext().TraceID(), client.SpanContext.TraceID())
	require.Equal(t, parent.SpanContext().SpanID(), client.Parent.SpanID())
	require.Contains(t, traceparent, client.SpanContext.TraceID().String())
	for _, a := range client.Attributes {
		require.NotContains(t, a.Value.Emit(), "test-key", "the key stays out of spans (%s)", a.Key)
	}
}
