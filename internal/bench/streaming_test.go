package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/stream"
)

// Row 1b with streaming on: the same turns, their model calls streamed
// to an embedded NATS server, against the bare loop. Gated: set
// TOLLGATE_BENCH_STREAMING=1 (and TOLLGATE_BENCH_STREAMING_REPS, by
// default as many as make bench runs: a repetition's ratio varies by a
// tenth either way on a shared machine, and the median of few is no
// better).
//
//	TOLLGATE_BENCH_STREAMING=1 go test -run TestStreamingRow1b -v ./internal/bench/
func TestStreamingRow1b(t *testing.T) {
	reps := gated(t, "TOLLGATE_BENCH_STREAMING", "row 1b with streaming on", "TOLLGATE_BENCH_STREAMING_REPS", DefaultConfig().CallReps)
	nats, err := stream.StartEmbedded(t.TempDir(), 0)
	require.NoError(t, err)
	t.Cleanup(nats.Shutdown)
	pub, err := stream.Connect(stream.Config{URL: nats.URL()})
	require.NoError(t, err)
	t.Cleanup(pub.Close)
	require.Eventually(t, pub.Ready, 10*time.Second, 20*time.Millisecond)

	for _, on := range []bool{false, true} {
		opts := Options{}
		if on {
			opts.Events = pub
		}
		r := runRow1b(t, opts, reps)
		t.Logf("streaming %v: %d calls, per call %s (bare loop %s), ratio to the bare loop %.3f (goal %.2f); repetitions' ratios: quartiles %.2f to %.2f",
			on, r.N, r.PerCall, r.PerCallLoop, r.RatioLoop, LoopCallGoal, Percentile(r.RepRatios, 25), Percentile(r.RepRatios, 75))
	}
	published, dropped := pub.Counts()
	t.Logf("events published %d, dropped %d", published, dropped)
	require.Positive(t, published, "the streamed turns published their events")
}

// runRow1b runs benchmark 1's turns, reps times, on a server of their own
// with the suite's tuned configuration and the Tollgate worker opts says.
func runRow1b(t *testing.T, opts Options, reps int) *callsReport {
	t.Helper()
	opts.DynamicConfig = TunedDynamicConfig()
	e, err := Start(opts)
	require.NoError(t, err)
	defer e.Close()
	tc, err := e.ToolCalls(t.Context(), DefaultConfig().Calls, reps)
	require.NoError(t, err)
	return newCallsReport(tc)
}
