package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/internal/telemetry/telemetrytest"
)

// Each request is a server span named by its route, under the caller's
// trace, and the parent of the Temporal calls it makes; link tokens and
// OAuth query parameters appear nowhere in the spans.
func TestRequestsAreServerSpansWithoutTokens(t *testing.T) {
	exp, tp := telemetrytest.Capture(t)

	e := newEnv(t, envOptions{})
	id := e.park("", "one", "ann", 1)

	// A gateway whose Temporal client traces, as the gateway command's
	// does when tracing is on.
	ti, err := telemetry.Interceptor(tp)
	require.NoError(t, err)
	plugin, err := tollgate.NewClientPlugin(e.data)
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: e.hostPort, Namespace: e.ns, Logger: sdkLogger,
		Plugins: []client.Plugin{plugin}, Interceptors: []interceptor.ClientInterceptor{ti}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	srv, err := gateway.New(gateway.Options{Temporal: c, TaskQueue: e.tq, Keys: e.keys, Links: e.signer,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	key := e.key("ann", []apikey.Scope{apikey.Read})

	callerCtx, caller := tp.Tracer("test").Start(context.Background(), "caller")
	header := map[string]string{}
	propagation.TraceContext{}.Inject(callerCtx, propagation.MapCarrier(header))
	got := doWith(t, http.DefaultClient, hs.URL, request{method: http.MethodGet, path: "/v1/turns/" + id, key: key, header: header})
	caller.End()
	require.Equal(t, http.StatusOK, got.code, got.body)

	server := spanNamed(t, exp, "GET /v1/turns/{id}")
	require.Equal(t, trace.SpanKindServer, server.SpanKind)
	require.Equal(t, caller.SpanContext().TraceID(), server.SpanContext.TraceID(), "the request joins the caller's trace")
	require.Equal(t, caller.SpanContext().SpanID(), server.Parent.SpanID())
	require.Equal(t, "200", telemetrytest.Attr(server, "http.response.status_code"))
	children := 0
	for _, s := range exp.GetSpans() {
		if s.Parent.SpanID() == server.SpanContext.SpanID() && s.SpanKind == trace.SpanKindClient {
			children++
		}
	}
	require.Positive(t, children, "the Temporal calls of the request are its children: %v", telemetrytest.Names(exp.GetSpans()))

	// A link token in the path and OAuth parameters in the query.
	exp.Reset()
	const token = "eyJ0IjoidHVybiJ9.c2VjcmV0LXNpZ25hdHVyZQ"
	got = doWith(t, http.DefaultClient, hs.URL, request{method: http.MethodGet, path: "/v1/links/" + token + "?code=oauth-code-secret&state=oauth-state-secret"})
	require.Equal(t, http.StatusForbidden, got.code)
	link := spanNamed(t, exp, "GET /v1/links/{token}")
	require.Equal(t, "403", telemetrytest.Attr(link, "http.response.status_code"))
	for _, s := range exp.GetSpans() {
		all := telemetrytest.Text(s)
		for _, secret := range []string{token, "c2VjcmV0LXNpZ25hdHVyZQ", "oauth-code-secret", "oauth-state-secret"} {
			require.NotContains(t, all, secret, "span %s", s.Name)
		}
	}
}

func spanNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %v", name, telemetrytest.Names(exp.GetSpans()))
	return tracetest.SpanStub{}
}
