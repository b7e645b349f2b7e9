package providers

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

// traced returns c (nil is the SDKs' default, http.DefaultClient) with its
// transport wrapped by OpenTelemetry's: each provider request becomes a
// client span under the CallModel activity's span and carries the trace
// context onward. Without a tracer provider installed (tracing off) the
// spans are no-ops. The span records the method, URL and status, never
// the request's headers or body, so keys and conversations stay out.
func traced(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	out := *c
	base := out.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out.Transport = otelhttp.NewTransport(base)
	return &out
}
