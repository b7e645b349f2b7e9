package bench

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// gated skips a gated measurement unless the environment variable gate is
// set, saying what setting it measures, and returns the count the variable
// count gives: def when it is unset or not a positive number.
func gated(t *testing.T, gate, what, count string, def int) int {
	t.Helper()
	if os.Getenv(gate) == "" {
		t.Skipf("set %s=1 to measure %s", gate, what)
	}
	if n, err := strconv.Atoi(os.Getenv(count)); err == nil && n > 0 {
		return n
	}
	return def
}

func TestMain(m *testing.M) {
	// The parked-turn benchmark re-executes this binary as its worker.
	MaybeRunWorker()
	os.Exit(m.Run())
}

// TestSuiteSmoke runs the whole suite at a tiny size, so that a change to
// the workflow's contract breaks this test rather than `make bench`. It
// checks that every benchmark runs and reports, not how fast: each runs
// with a sample or two, and the run has the test's own deadline (go test
// -timeout), not a budget of its own that a busy machine overruns.
func TestSuiteSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded server and subprocess workers")
	}
	cfg := DefaultConfig()
	cfg.Reps, cfg.CallReps, cfg.Calls, cfg.ResumeSamples, cfg.EagerSamples, cfg.Parked, cfg.Cache = 1, 1, 2, 2, 2, 20, 5
	cfg.Total, cfg.InFlight, cfg.TPCalls, cfg.Configs, cfg.Micro = 5, 5, 1, false, false
	cfg.Recovery, cfg.Gateway, cfg.GatewayLists = 2, 20, 2
	cfg.Sessions = SessionConfig{Turns: 4, PerRun: 2, Samples: 2, Idle: 10, Cache: 5}
	cfg.ManyCalls = ManyCallsConfig{Calls: 20, ShortCalls: 5, ShortReps: 1, SampleEvery: time.Second}
	cfg.Log = logWriter{t}
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		// Stop early enough to report which benchmark was running.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-30*time.Second))
		defer cancel()
	}
	began := time.Now()
	report, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the suite ran in %v", time.Since(began).Round(time.Second))
	for _, want := range []string{"| 1a |", "| 2b |", "| 3b |", "| 4a |", "| 5d |", "| 9c |", "| 8b |", "| 10b |"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks row %s:\n%s", want, report)
		}
	}
}

// logWriter sends the suite's progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
