package bench

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"
)

var recoveryRow = flag.Bool("recovery", false, "run benchmark 7 (recovery after SIGKILL) alone: go test ./internal/bench/ -run Recovery -recovery -v")

// TestRecoveryRow runs benchmark 7 alone and prints its rows. It is off
// by default: TestSuiteSmoke and `make bench` run it with the rest.
func TestRecoveryRow(t *testing.T) {
	if !*recoveryRow {
		t.Skip("pass -recovery to run benchmark 7 alone")
	}
	e, err := Start(Options{DynamicConfig: TunedDynamicConfig(), NoWorkers: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := e.Recovery(ctx, DefaultConfig().Recovery)
	if err != nil {
		t.Fatal(err)
	}
	report, err := render(&measurements{Recovery: r})
	if err != nil {
		t.Fatal(err)
	}
	// Benchmark 7's rows and paragraphs: the report from its table on,
	// without the closing line.
	_, body, _ := strings.Cut(report, "\n| # |")
	body, _, _ = strings.Cut(body, "\nWhole run")
	t.Logf("\n| # |%s", body)
	if len(r.Tollgate) != r.N || len(r.Bare) != r.N {
		t.Fatalf("%d Tollgate and %d bare samples, want %d each", len(r.Tollgate), len(r.Bare), r.N)
	}
}
