package bench

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMedianIntervalRanks(t *testing.T) {
	xs := make([]float64, 101)
	for i := range xs {
		// Out of order, so that the interval comes from sorting.
		xs[(i*37)%101] = float64(i + 1)
	}
	lo, hi := MedianInterval(xs)
	// n=101: ranks 41 and 61 (50.5 ∓ 1.96·√101/2 rounded, the upper
	// one past the middle by one).
	require.Equal(t, 41.0, lo)
	require.Equal(t, 61.0, hi)

	lo, hi = MedianInterval([]float64{3, 1, 2})
	require.Equal(t, 1.0, lo, "too few for an interval narrower than the range")
	require.Equal(t, 3.0, hi)

	lo, hi = MedianInterval(nil)
	require.Zero(t, lo)
	require.Zero(t, hi)
}

// The interval holds the true median about 95% of the time (95.4% exactly
// for 101 samples), however skewed the repetitions are: neither narrower
// than it claims nor needlessly wide.
func TestMedianIntervalCoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const trials = 2000
	// Exponential with rate 1: median ln 2, a long right tail like a
	// loaded machine's.
	const median = 0.6931471805599453
	held := 0
	for range trials {
		xs := make([]float64, 101)
		for i := range xs {
			xs[i] = r.ExpFloat64()
		}
		if lo, hi := MedianInterval(xs); lo <= median && median <= hi {
			held++
		}
	}
	coverage := float64(held) / trials
	require.InDelta(t, 0.954, coverage, 0.02, "coverage %.3f", coverage)
}
