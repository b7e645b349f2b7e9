package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"
)

// Median of ds; zero for none.
func Median(ds []time.Duration) time.Duration { return Percentile(ds, 50) }

// Percentile by nearest rank, of durations or ratios.
func Percentile[T time.Duration | float64](xs []T, p float64) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	k := int(math.Ceil(p/100*float64(len(s)))) - 1
	if k < 0 {
		k = 0
	}
	if k >= len(s) {
		k = len(s) - 1
	}
	return s[k]
}

// MedianFloat of xs.
func MedianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// MedianInterval is a 95% confidence interval for the median of the
// distribution xs were drawn from, by order statistics: it assumes
// nothing of the distribution's shape, which a shared machine's
// repetitions do not have. One run's median ratio says little on its
// own: its interval says whether a goal a few hundredths away was met
// or missed, or whether the run cannot tell.
func MedianInterval(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := float64(len(s))
	half := 1.96 * math.Sqrt(n) / 2
	// 1-based ranks j and k, rounded to the nearest: the interval then
	// holds the median at least 95% of the time for these sizes (95.4%
	// for 101 repetitions, 95.2% for 201).
	j := max(int(math.Round(n/2-half)), 1)
	k := min(int(math.Round(1+n/2+half)), len(s))
	return s[j-1], s[k-1]
}

// Pool runs fn(i) for i in [0,total) with at most width in flight and
// returns the first error.
func Pool(ctx context.Context, width, total int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	for w := 0; w < width && w < total; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next >= total || first != nil {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("item %d: %w", i, err)
						cancel()
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// repRatio is the median over reps of a[i]/b[i]: each pair ran
// back to back, so load from other processes mostly cancels out.
func repRatio[T time.Duration | float64](a, b []T) float64 { return MedianFloat(repRatios(a, b)) }

// repRatios are a[i]/b[i], rep by rep.
func repRatios[T time.Duration | float64](a, b []T) []float64 {
	rs := make([]float64, len(a))
	for i := range a {
		rs[i] = ratio(float64(a[i]), float64(b[i]))
	}
	return rs
}

func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f >= 100:
		return fmt.Sprintf("%.0f ms", f)
	case f >= 10:
		return fmt.Sprintf("%.1f ms", f)
	default:
		return fmt.Sprintf("%.2f ms", f)
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.Inf(1)
	}
	return a / b
}

func bytesStr(n float64) string {
	if n < 0 {
		return "−" + bytesStr(-n)
	}
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", n)
	}
}
