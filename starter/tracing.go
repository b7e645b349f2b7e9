package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tollgate-dev/tollgate/internal/telemetry"
)

// startTracing exports the starter's spans over OTLP when the OTEL_*
// variables ask for it, so a turn's trace begins at the command that
// started or answered it. A bad configuration is reported and the command
// runs untraced: tracing must not stand between a person and an approval.
// The returned function flushes the spans before the process exits.
func startTracing(ctx context.Context, stderr io.Writer) (flush func()) {
	t, err := telemetry.StartTracing(ctx, "tollgate-starter")
	if err != nil {
		fmt.Fprintf(stderr, "tracing off: %v\n", err)
	}
	return func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(fctx); err != nil {
			fmt.Fprintf(stderr, "traces not flushed: %v\n", err)
		}
	}
}
