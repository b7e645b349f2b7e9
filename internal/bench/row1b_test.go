package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// row1b is a paired row-1b run: the turns of each worker configuration
// and the bare loop beside them, repetition by repetition.
type row1b struct {
	turns [][]time.Duration // by configuration
	bare  []time.Duration
}

// perCall is configuration k's median turn and the median bare loop per
// tool call.
func (r *row1b) perCall(k int) (turn, bare time.Duration) {
	n := time.Duration(DefaultConfig().Calls)
	return Median(r.turns[k]) / n, Median(r.bare) / n
}

// ratios are configuration k's per-repetition ratios to the bare loop.
func (r *row1b) ratios(k int) []float64 { return repRatios(r.turns[k], r.bare) }

// against is configuration k's per-repetition ratios to configuration
// base.
func (r *row1b) against(k, base int) []float64 { return repRatios(r.turns[k], r.turns[base]) }

// medianOf is the median of ratios with its 95% interval, as the rows
// log it.
func medianOf(ratios []float64) string {
	lo, hi := MedianInterval(ratios)
	return fmt.Sprintf("%.3f (95%% interval %.3f to %.3f)", MedianFloat(ratios), lo, hi)
}

// pairedRow1b runs benchmark 1's turns with activity tools on Start's
// own worker (configuration 0) and on a worker for each variant
// (configuration k is variants[k-1]), and the bare loop of the same
// activities, all on one server: a repetition of each in turn, the order
// rotating. Run one after the other, two configurations differed by as
// much as the machine drifted between them; on servers of their own, by
// as much as two servers' bare loops did (up to 5%).
func pairedRow1b(t *testing.T, reps int, variants ...Variant) *row1b {
	t.Helper()
	n := DefaultConfig().Calls
	e, err := Start(Options{DynamicConfig: TunedDynamicConfig(), Variants: variants})
	require.NoError(t, err)
	t.Cleanup(e.Close)
	model, err := e.Script(n, 1, NoopTool, struct{}{})
	require.NoError(t, err)
	ctx := t.Context()
	queues := []string{TollgateQueue}
	for _, v := range variants {
		queues = append(queues, v.Queue)
	}
	runs := make([]func() error, 0, len(queues)+1)
	for _, queue := range queues {
		runs = append(runs, func() error {
			_, err := e.runTurnOn(ctx, queue, id("paired-turn"), TurnInput(model, n, false))
			return err
		})
	}
	runs = append(runs, func() error { return e.RunBare(ctx, id("paired-loop"), BareLoopName, n) })
	r := &row1b{turns: make([][]time.Duration, len(queues))}
	// One unmeasured round warms every worker.
	for i := -1; i < reps; i++ {
		got := make([]time.Duration, len(runs))
		for j := range runs {
			at := (i + 1 + j) % len(runs)
			d, err := timed(runs[at])
			require.NoError(t, err)
			got[at] = d
		}
		if i < 0 {
			continue
		}
		for k := range queues {
			r.turns[k] = append(r.turns[k], got[k])
		}
		r.bare = append(r.bare, got[len(queues)])
	}
	return r
}
