package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// The parked-turn benchmark re-executes this binary as its worker.
	MaybeRunWorker()
	os.Exit(m.Run())
}

// TestSuiteSmoke runs the whole suite at a tiny size, so that a change to
// the workflow's contract breaks this test rather than `make bench`.
func TestSuiteSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded server and subprocess workers")
	}
	cfg := DefaultConfig()
	cfg.Reps, cfg.CallReps, cfg.Calls, cfg.ResumeSamples, cfg.Parked, cfg.Cache = 1, 1, 2, 2, 20, 5
	cfg.Total, cfg.InFlight, cfg.Configs, cfg.Micro = 5, 5, false, false
	cfg.Sessions = SessionConfig{Turns: 4, PerRun: 2, Samples: 2, Idle: 10, Cache: 5}
	cfg.Gateway = 20
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	report, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 1a |", "| 2b |", "| 3b |", "| 4a |", "| 5d |", "| 9c |", "| 8b |"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks row %s:\n%s", want, report)
		}
	}
}
