package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/stream"
)

// Row 1b with streaming on: the same turns, their model calls streamed
// to an embedded NATS server, against the bare loop, and against the
// same turns unstreamed, all three on one server, run in turn.
// Gated: set TOLLGATE_BENCH_STREAMING=1 (and TOLLGATE_BENCH_STREAMING_REPS,
// by default as many as make bench runs: a repetition's ratio varies by
// a tenth either way on a shared machine, and the median of few is no
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

	row := pairedRow1b(t, reps, Variant{Queue: TollgateQueue + "-streaming", Events: pub})
	for k := range row.turns {
		turn, bare := row.perCall(k)
		ratios := row.ratios(k)
		t.Logf("streaming %v: %d calls, per call %s (bare loop %s), ratio to the bare loop %s (goal %.2f); repetitions' ratios: quartiles %.2f to %.2f",
			k == 1, DefaultConfig().Calls, turn, bare, medianOf(ratios), StreamingCallGoal, Percentile(ratios, 25), Percentile(ratios, 75))
	}
	t.Logf("streamed turns against unstreamed ones, repetition by repetition: %s", medianOf(row.against(1, 0)))
	published, dropped := pub.Counts()
	t.Logf("events published %d, dropped %d", published, dropped)
	require.Positive(t, published, "the streamed turns published their events")
}
