package gateway_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/turnlist"
	"github.com/tollgate-dev/tollgate/workflows"
)

// BenchmarkListWaiting measures GET /v1/turns?status=waiting (the default
// limit, 50 turns with their waiting cards) while 1,000 turns are parked
// on one worker. It reports the median and 95th percentile of one
// request, the contract's goal being a median under 200 ms.
//
//	go test -run '^$' -bench ListWaiting -benchtime 200x ./gateway/
var benchPollers = flag.Int("bench-pollers", 0, "workflow task pollers of the benchmark's worker (0: the SDK's default, 2)")

func BenchmarkListWaiting(b *testing.B) {
	const parked = 1000
	e := newEnv(b, envOptions{pollers: *benchPollers})
	ops := e.key("ops", readAnswer)
	user := e.name + "-bench"
	start := time.Now()
	parkMany(b, e, user, parked)
	b.Logf("parked %d turns in %s", parked, time.Since(start).Round(time.Second))

	// Sub-benchmarks share the parked turns: the parent runs once.
	b.Run("visibility", func(b *testing.B) {
		measure(b, func() {
			ts, err := turnlist.List(context.Background(), e.caller, turnlist.Filter{Status: workflows.StatusWaiting, User: user})
			require.NoError(b, err)
			require.Len(b, ts, turnlist.DefaultLimit)
		})
	})
	b.Run("one-state-query", func(b *testing.B) {
		id := e.turns[0]
		measure(b, func() {
			_, err := e.state(id)
			require.NoError(b, err)
		})
	})
	for _, par := range []int{1, 16, 50} {
		b.Run(fmt.Sprintf("50-state-queries-%d-at-once", par), func(b *testing.B) {
			measure(b, func() {
				sem := make(chan struct{}, par)
				var wg sync.WaitGroup
				for _, id := range e.turns[:50] {
					sem <- struct{}{}
					wg.Go(func() {
						defer func() { <-sem }()
						_, err := e.state(id)
						require.NoError(b, err)
					})
				}
				wg.Wait()
			})
		})
	}
	b.Run("http", func(b *testing.B) {
		path := "/v1/turns?status=waiting&user=" + user
		measure(b, func() {
			r := e.do(request{method: "GET", path: path, key: ops})
			if r.code != http.StatusOK {
				b.Fatalf("list: %d %s", r.code, r.body)
			}
		})
	})
}

// measure runs f b.N times and reports the median and 95th percentile.
func measure(b *testing.B, f func()) {
	times := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		f()
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(times[len(times)*95/100].Microseconds())/1000, "ms-p95")
}

// parkMany starts n turns of the "one" script for user, 32 at a time, and
// waits until visibility lists all of them as waiting.
func parkMany(b *testing.B, e *env, user string, n int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		id := fmt.Sprintf("%s-parked-%d", e.name, i)
		e.turns = append(e.turns, id)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := c.Start(ctx, id, workflows.Input{Prompt: "deploy", Model: "gw:one", Tools: []string{"deploy"}, User: user})
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(b, firstErr)
	q := fmt.Sprintf("%s = '%s' AND %s = '%s'", workflows.UserAttr.GetName(), user, workflows.StatusAttr.GetName(), workflows.StatusWaiting)
	for {
		resp, err := e.caller.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: q})
		require.NoError(b, err)
		if resp.GetCount() == int64(n) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
