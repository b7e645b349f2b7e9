package bench

import (
	"bytes"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/stream"
)

// Row 1b with streaming on: the same turns, their model calls streamed
// to an embedded NATS server, against the bare loop, and against the
// same turns unstreamed, all on one server, run in turn. A fourth
// configuration streams into stream.Discard: the turn and its model
// calls do all their streaming work but nothing is encoded or sent, which
// splits streaming's cost between the worker and the transport.
// Gated: set TOLLGATE_BENCH_STREAMING=1 (and TOLLGATE_BENCH_STREAMING_REPS,
// by default as many as make bench runs: a repetition's ratio varies by
// a tenth either way on a shared machine, and the median of few is no
// better).
//
//	TOLLGATE_BENCH_STREAMING=1 go test -run TestStreamingRow1b -v ./internal/bench/
func TestStreamingRow1b(t *testing.T) {
	reps := gated(t, "TOLLGATE_BENCH_STREAMING", "row 1b with streaming on", "TOLLGATE_BENCH_STREAMING_REPS", DefaultConfig().CallReps)
	pub := embeddedPublisher(t)

	row := pairedRow1b(t, reps,
		Variant{Queue: TollgateQueue + "-streaming", Events: pub},
		Variant{Queue: TollgateQueue + "-discarded", Events: stream.Discard{}})
	for k, name := range []string{"unstreamed", "streamed", "streamed into Discard"} {
		turn, bare := row.perCall(k)
		ratios := row.ratios(k)
		t.Logf("%s: %d calls, per call %s (bare loop %s), ratio to the bare loop %s (goal %.2f); repetitions' ratios: quartiles %.2f to %.2f",
			name, DefaultConfig().Calls, turn, bare, medianOf(ratios), StreamingCallGoal, Percentile(ratios, 25), Percentile(ratios, 75))
	}
	t.Logf("repetition by repetition: streamed against unstreamed %s; the worker's part (Discard against unstreamed) %s; the transport's (streamed against Discard) %s",
		medianOf(row.against(1, 0)), medianOf(row.against(2, 0)), medianOf(row.against(1, 2)))
	published, dropped := pub.Counts()
	t.Logf("events published %d, dropped %d", published, dropped)
	require.Positive(t, published, "the streamed turns published their events")
}

// Where row 1b's turns spend CPU beyond the bare loop's, unstreamed and
// streamed: blocks of turns of each kind in turn, each block under a CPU
// profile of this whole process (server, workers, NATS), summed by kind
// and split by role (splitByRole). Paired by block, since from one run
// to the next the server's share alone moved by a fifth.
// Gated: TOLLGATE_BENCH_CPU=1 (and TOLLGATE_BENCH_CPU_BLOCKS, blocks of
// 10 turns a kind).
//
//	TOLLGATE_BENCH_CPU=1 go test -run TestStreamingRow1bCPU -v ./internal/bench/
func TestStreamingRow1bCPU(t *testing.T) {
	const per = 10
	blocks := gated(t, "TOLLGATE_BENCH_CPU", "row 1b's CPU by role", "TOLLGATE_BENCH_CPU_BLOCKS", 30)
	pub := embeddedPublisher(t)
	streamed := TollgateQueue + "-streaming"
	n := DefaultConfig().Calls
	e, err := Start(Options{DynamicConfig: TunedDynamicConfig(), Variants: []Variant{{Queue: streamed, Events: pub}}})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	model, err := e.Script(n, 1, NoopTool, struct{}{})
	require.NoError(t, err)
	ctx := t.Context()
	kinds := []string{"bare loop", "unstreamed", "streamed"}
	run := []func() error{
		func() error { return e.RunBare(ctx, id("cpu-loop"), BareLoopName, n) },
		func() error {
			_, err := e.runTurnOn(ctx, TollgateQueue, id("cpu-turn"), TurnInput(model, n, false))
			return err
		},
		func() error {
			_, err := e.runTurnOn(ctx, streamed, id("cpu-streamed"), TurnInput(model, n, false))
			return err
		},
	}
	for _, f := range run {
		require.NoError(t, f(), "warm-up")
	}
	roles := make([]map[string]time.Duration, len(kinds))
	walls := make([]time.Duration, len(kinds))
	for i := range roles {
		roles[i] = map[string]time.Duration{}
	}
	for b := 0; b < blocks; b++ {
		for j := range kinds {
			k := (b + j) % len(kinds)
			var wall time.Duration
			var buf bytes.Buffer
			require.NoError(t, pprof.StartCPUProfile(&buf))
			for range per {
				d, err := timed(run[k])
				if err != nil {
					pprof.StopCPUProfile()
					require.NoError(t, err)
				}
				wall += d
			}
			pprof.StopCPUProfile()
			p, err := profile.ParseData(buf.Bytes())
			require.NoError(t, err)
			split, err := splitByRole(p)
			require.NoError(t, err)
			for r, d := range split {
				roles[k][r] += d
			}
			walls[k] += wall
		}
	}
	turns := time.Duration(blocks * per)
	ms := func(d time.Duration) float64 { return float64(d/turns) / 1e6 }
	var total [3]time.Duration
	for _, r := range roleNames() {
		for k := range kinds {
			total[k] += roles[k][r]
		}
		bare := roles[0][r]
		t.Logf("%-18s bare loop %.2f ms, unstreamed %.2f ms (%+.2f ms), streamed %.2f ms (%+.2f ms) CPU a turn", r,
			ms(bare), ms(roles[1][r]), ms(roles[1][r]-bare), ms(roles[2][r]), ms(roles[2][r]-bare))
	}
	for k, name := range kinds {
		t.Logf("%s: %.2f ms CPU and %.2f ms wall a turn", name, ms(total[k]), ms(walls[k]))
	}
	require.Positive(t, roles[1]["workflow code"], "the turns' workflow code shows in the profiles")
}

// embeddedPublisher publishes to a NATS server embedded for the test.
func embeddedPublisher(t *testing.T) *stream.NATS {
	t.Helper()
	nats, err := stream.StartEmbedded(t.TempDir(), 0)
	require.NoError(t, err)
	t.Cleanup(nats.Shutdown)
	pub, err := stream.Connect(stream.Config{URL: nats.URL()})
	require.NoError(t, err)
	t.Cleanup(pub.Close)
	require.Eventually(t, pub.Ready, 10*time.Second, 20*time.Millisecond)
	return pub
}
