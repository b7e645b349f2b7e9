// Command bench runs Tollgate's benchmark suite against bare Temporal on
// one embedded server and writes the markdown report (`make bench`).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tollgate-dev/tollgate/internal/bench"
)

func main() {
	// A subprocess worker of the parked-turn benchmark never returns here.
	bench.MaybeRunWorker()

	cfg := bench.DefaultConfig()
	out := flag.String("out", "docs/bench-results.md", "write the report here too (empty: stdout only)")
	long := flag.Bool("long", false, "park 10,000 turns instead of 2,000")
	quick := flag.Bool("quick", false, "a small, fast run to check the suite works (numbers are not meaningful)")
	timeout := flag.Duration("timeout", 0, "give up after this long (default 25m, 45m with -long)")
	flag.IntVar(&cfg.Reps, "reps", cfg.Reps, "repetitions of the macro benchmarks")
	flag.IntVar(&cfg.CallReps, "call-reps", cfg.CallReps, "repetitions of the tool-call benchmark")
	flag.IntVar(&cfg.Calls, "calls", cfg.Calls, "sequential tool calls per turn in the tool-call benchmark")
	flag.IntVar(&cfg.ResumeSamples, "resume-samples", cfg.ResumeSamples, "resume samples per side and rep")
	flag.IntVar(&cfg.EagerSamples, "eager-samples", cfg.EagerSamples, "samples of each kind of start in the eager-start row (2d)")
	flag.IntVar(&cfg.Total, "total", cfg.Total, "turns per rep of the throughput benchmark")
	flag.IntVar(&cfg.Parked, "parked", cfg.Parked, "parked turns")
	flag.IntVar(&cfg.Cache, "cache", cfg.Cache, "sticky workflow cache size of the parked-turn workers")
	flag.BoolVar(&cfg.Configs, "configs", cfg.Configs, "compare the server's default dynamic config with the tuned one")
	flag.BoolVar(&cfg.Micro, "micro", cfg.Micro, "run the micro benchmarks")
	flag.IntVar(&cfg.Gateway, "gateway", cfg.Gateway, "turns parked for the gateway benchmark (8); 0 skips it")
	flag.IntVar(&cfg.ManyCalls.Calls, "many-calls", cfg.ManyCalls.Calls, "tool calls of benchmark 10's long turn; 0 skips it")
	flag.StringVar(&cfg.Only, "only", "", "run just these benchmarks, by number, comma-separated (\"1,4\"); the report then has their rows only")
	flag.StringVar(&cfg.Profiles, "profiles", "", "also write the raw CPU and heap profiles to this directory")
	flag.Parse()
	// A report of one benchmark must not replace the whole suite's.
	if cfg.Only != "" {
		outSet := false
		flag.Visit(func(f *flag.Flag) { outSet = outSet || f.Name == "out" })
		if !outSet {
			*out = ""
		}
	}
	if *long {
		cfg.Parked = 10000
	}
	if *timeout == 0 {
		// The whole suite took 8.5 minutes before benchmarks 8 and 9 added
		// five to ten.
		*timeout = 25 * time.Minute
		if *long {
			*timeout = 45 * time.Minute
		}
	}
	if *quick {
		cfg.Reps, cfg.CallReps, cfg.Calls, cfg.ResumeSamples, cfg.Parked, cfg.Cache, cfg.Total, cfg.InFlight = 2, 3, 3, 5, 100, 20, 20, 10
		cfg.EagerSamples = 5
		cfg.Gateway = 100
		cfg.ManyCalls = bench.ManyCallsConfig{Calls: 300, ShortCalls: 30, ShortReps: 1, SampleEvery: time.Second}
	}
	cfg.Log = os.Stderr

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	report, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Print(report)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "wrote", *out)
	}
}
