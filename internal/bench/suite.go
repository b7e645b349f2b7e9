package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/server/common/dynamicconfig"

	"github.com/tollgate-dev/tollgate/storage/codec"
)

// Config sizes a suite run.
type Config struct {
	// Reps is the number of measured repetitions of the macro benchmarks;
	// CallReps of benchmark 1, whose turns are short.
	Reps, CallReps int
	// Calls is N, the sequential tool calls of benchmark 1.
	Calls int
	// ResumeSamples is the number of resume samples per side and rep;
	// EagerSamples of each kind of start in row 2d (0 skips it).
	ResumeSamples, EagerSamples int
	// Parked is the number of parked turns; Cache the subprocess worker's
	// sticky cache size.
	Parked, Cache int
	// Throughput: Total turns per rep with InFlight at once, TPCalls
	// tool calls each.
	Total, InFlight, TPCalls int
	// Configs also compares the server's default dynamic config with the
	// tuned one.
	Configs bool
	// Micro runs the micro benchmarks.
	Micro bool
	// Recovery is the workflows a side in flight when benchmark 7 kills
	// the worker; 0 skips it.
	Recovery int
	// Gateway is the turns parked for benchmark 8 (the HTTP gateway); 0
	// skips it. GatewayLists is how many list requests it times a side.
	Gateway, GatewayLists int
	// Only runs just the benchmarks it lists by number, comma-separated
	// ("1,4"); empty runs them all.
	Only string
	// Profiles, when set, is a directory that receives the raw CPU and
	// heap profiles the suite takes (benchmark 1's tool calls, benchmark
	// 3's workers), for `go tool pprof`.
	Profiles string
	// Sessions sizes benchmark 9; Sessions.Turns 0 skips it.
	Sessions SessionConfig
	// ManyCalls sizes benchmark 10; ManyCalls.Calls 0 skips it.
	ManyCalls ManyCallsConfig
	// Log receives progress lines.
	Log io.Writer
}

// DefaultConfig is what `make bench` runs.
func DefaultConfig() Config {
	c := Config{Reps: 5, CallReps: 15, Calls: 10, ResumeSamples: 100, EagerSamples: 50, Parked: 2000, Cache: 250,
		Total: 150, InFlight: 50, TPCalls: 3, Configs: true, Micro: true, Recovery: 30, Gateway: 1000, GatewayLists: GatewayLists, Log: io.Discard}
	c.Sessions = SessionConfig{Turns: 300, PerRun: 100, Samples: 50, Idle: 1000, Cache: 250}
	c.ManyCalls = ManyCallsConfig{Calls: 10_000, ShortCalls: 100, ShortReps: 3, SampleEvery: 5 * time.Second}
	return c
}

// fastQueues is the setting that matters: the embedded server has one
// history shard, and each of its queue processors reads new tasks at most
// 20 times a second by default, so a workflow task dispatch waits up to
// 50 ms for the next read. Production clusters spread this over hundreds
// of shards; one shard needs the limit lifted.
func fastQueues() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		dynamicconfig.TransferProcessorMaxPollRPS.Key():   10000,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():      10000,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key(): 10000,
		dynamicconfig.OutboundProcessorMaxPollRPS.Key():   10000,
	}
}

// TunedDynamicConfig is the dynamic config the suite runs both sides
// with; the config comparison shows what each part is worth.
func TunedDynamicConfig() dynamicconfig.StaticClient {
	dc := fastQueues()
	dc[dynamicconfig.MatchingNumTaskqueueReadPartitions.Key()] = 1
	dc[dynamicconfig.MatchingNumTaskqueueWritePartitions.Key()] = 1
	return dc
}

func describe(dc dynamicconfig.StaticClient) string {
	if len(dc) == 0 {
		return "server defaults"
	}
	var parts []string
	for k, v := range dc {
		parts = append(parts, fmt.Sprintf("`%s=%v`", k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

type namedConfig struct {
	name   string
	dc     dynamicconfig.StaticClient
	sqlite bool
}

func configs() []namedConfig {
	partitions := dynamicconfig.StaticClient{
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
	}
	return []namedConfig{
		{"server defaults", nil, false},
		{"1 task queue partition", partitions, false},
		{"queue processors at 10000 reads/s", fastQueues(), false},
		{"both (used below)", TunedDynamicConfig(), false},
		{"both, SQLite in a file as `worker --dev` keeps it (WAL, synchronous=FULL)", TunedDynamicConfig(), true},
	}
}

// Run runs the suite and returns the markdown report.
func Run(ctx context.Context, cfg Config) (string, error) {
	logf := func(format string, args ...any) {
		fmt.Fprintf(cfg.Log, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	started := time.Now()
	dc := TunedDynamicConfig()
	m := &measurements{
		Machine: machine(), DynamicConfig: describe(dc),
		Reps: cfg.Reps, CallReps: cfg.CallReps, TPReps: max(3, cfg.Reps-2), InFlight: cfg.InFlight,
	}
	var err error
	want, err := only(cfg.Only)
	if err != nil {
		return "", err
	}
	if cfg.Only == "" && cfg.Micro || cfg.Only != "" && want("6") {
		logf("micro benchmarks")
		m.Micros = runMicros()
	}
	if cfg.Only == "" && cfg.Configs {
		for _, c := range configs() {
			logf("dynamic config: %s", c.name)
			row, err := compareConfig(ctx, c, cfg)
			if err != nil {
				return "", fmt.Errorf("config %s: %w", c.name, err)
			}
			m.Configs = append(m.Configs, row)
		}
		logf("result waits")
		if m.Waits, err = resultWaits(ctx); err != nil {
			return "", fmt.Errorf("result waits: %w", err)
		}
	}

	e, err := Start(Options{DynamicConfig: dc})
	if err != nil {
		return "", err
	}
	defer e.Close()
	if cfg.Profiles != "" {
		if err := os.MkdirAll(cfg.Profiles, 0o755); err != nil {
			return "", err
		}
		e.Profiles = cfg.Profiles
	}

	if want("1") {
		logf("1. tool-call overhead")
		if m.ToolCalls, err = e.ToolCalls(ctx, cfg.Calls, cfg.CallReps); err != nil {
			return "", fmt.Errorf("tool calls: %w", err)
		}
		if m.Tmpfs, err = toolCallsOnTmpfs(ctx, cfg); err != nil {
			return "", fmt.Errorf("tool calls on tmpfs: %w", err)
		}
		if m.Encrypted, err = toolCallsEncrypted(ctx, cfg); err != nil {
			return "", fmt.Errorf("tool calls with encryption: %w", err)
		}
	}

	if want("2") {
		logf("2. resume latency")
		if m.Resume, err = e.Resume(ctx, cfg.ResumeSamples, 3); err != nil {
			return "", fmt.Errorf("resume: %w", err)
		}
		if cfg.EagerSamples > 0 {
			logf("2d. eager start: %d samples of each kind", cfg.EagerSamples)
			if m.Eager, err = e.EagerStart(ctx, cfg.EagerSamples); err != nil {
				return "", fmt.Errorf("eager start: %w", err)
			}
		}
	}

	if want("4") {
		logf("4. throughput")
		if m.Throughput, err = e.Throughput(ctx, cfg.TPCalls, cfg.InFlight, cfg.Total, m.TPReps); err != nil {
			return "", fmt.Errorf("throughput: %w", err)
		}
	}

	if want("5") {
		logf("5. history cost")
		if m.History, err = e.historyRuns(ctx); err != nil {
			return "", fmt.Errorf("history: %w", err)
		}
	}

	if cfg.Recovery > 0 && want("7") {
		logf("7. recovery after SIGKILL: %d in flight a side", cfg.Recovery)
		if m.Recovery, err = e.Recovery(ctx, cfg.Recovery); err != nil {
			return "", fmt.Errorf("recovery: %w", err)
		}
	}

	if cfg.Gateway > 0 && want("8") {
		if err := runGateway(ctx, cfg, m, logf); err != nil {
			return "", err
		}
	}

	if cfg.Sessions.Turns > 0 && want("9") {
		logf("9. sessions: %d turns, %d idle", cfg.Sessions.Turns, cfg.Sessions.Idle)
		if m.Sessions, err = e.Sessions(ctx, cfg.Sessions); err != nil {
			return "", fmt.Errorf("sessions: %w", err)
		}
	}

	if cfg.ManyCalls.Calls > 0 && want("10") {
		logf("10. a turn of %d tool calls against turns of %d", cfg.ManyCalls.Calls, cfg.ManyCalls.ShortCalls)
		if m.ManyCalls, err = e.ManyCalls(ctx, cfg.ManyCalls); err != nil {
			return "", fmt.Errorf("many calls: %w", err)
		}
	}

	if !want("3") {
		m.Elapsed, m.Repolls = time.Since(started), Repolls.Load()
		return render(m)
	}
	logf("3. parked turns: %d, sticky cache %d", cfg.Parked, cfg.Cache)
	var cps []int
	for _, c := range []int{cfg.Cache, 2 * cfg.Cache, 1000, 2000, 5000, 10000, cfg.Parked} {
		if c > 0 && c <= cfg.Parked && !slices.Contains(cps, c) {
			cps = append(cps, c)
		}
	}
	slices.Sort(cps)
	for i, side := range []string{sideTollgate, sideBare} {
		if m.Parked[i], err = e.ParkedTurns(ctx, side, cfg.Parked, cfg.Cache, cps); err != nil {
			return "", fmt.Errorf("parked %s: %w", side, err)
		}
	}

	m.Elapsed, m.Repolls = time.Since(started), Repolls.Load()
	return render(m)
}

// benchmarks are the numbers -only takes.
var benchmarks = []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}

// only parses a comma-separated list of benchmark numbers into a test
// for each; an empty list wants them all.
func only(list string) (func(string) bool, error) {
	if list == "" {
		return func(string) bool { return true }, nil
	}
	set := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(benchmarks, n) {
			return nil, fmt.Errorf("-only %q: %q is not one of the benchmarks %s", list, n, strings.Join(benchmarks, ", "))
		}
		set[n] = true
	}
	return func(n string) bool { return set[n] }, nil
}

// toolCallsOnTmpfs repeats benchmark 1 with the data directory in
// /dev/shm, to show what the transcript store's syncs cost; nil when
// there is no /dev/shm.
func toolCallsOnTmpfs(ctx context.Context, cfg Config) (*ToolCalls, error) {
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		return nil, nil
	}
	dir, err := os.MkdirTemp("/dev/shm", "tollgate-bench-")
	if err != nil {
		return nil, nil
	}
	defer os.RemoveAll(dir)
	e, err := Start(Options{DynamicConfig: TunedDynamicConfig(), DataDir: dir})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	return e.ToolCalls(ctx, cfg.Calls, cfg.CallReps)
}

// toolCallsEncrypted repeats benchmark 1 on a second server with payload
// encryption on, configured as a user turns it on: a keys file named by
// TOLLGATE_CODEC_KEYS_FILE, which the client (clientconfig) and the plugin
// read when they are built. The variable is set only while they are.
func toolCallsEncrypted(ctx context.Context, cfg Config) (*ToolCalls, error) {
	dir, err := os.MkdirTemp("", "tollgate-bench-keys-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	key, err := codec.NewKey("bench")
	if err != nil {
		return nil, err
	}
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte(key.Line()+"\n"), 0o600); err != nil {
		return nil, err
	}
	prev, had := os.LookupEnv(codec.EnvKeysFile)
	os.Setenv(codec.EnvKeysFile, keys)
	e, err := Start(Options{DynamicConfig: TunedDynamicConfig()})
	if had {
		os.Setenv(codec.EnvKeysFile, prev)
	} else {
		os.Unsetenv(codec.EnvKeysFile)
	}
	if err != nil {
		return nil, err
	}
	defer e.Close()
	return e.ToolCalls(ctx, cfg.Calls, cfg.CallReps)
}

// resultWaits shows the lost long-poll notification: on a server whose
// history long poll expires after 1 s instead of 20 s, a few of a run of
// plain run.Get waits last about 1 s longer than the workflow.
func resultWaits(ctx context.Context) (*lostNotifications, error) {
	w := &lostNotifications{N: 40, Interval: time.Second, Threshold: time.Second / 2}
	dc := TunedDynamicConfig()
	dc[dynamicconfig.HistoryLongPollExpirationInterval.Key()] = w.Interval
	e, err := Start(Options{DynamicConfig: dc})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if w.Stalls, w.Worst, err = e.ResultWaits(ctx, w.N, w.Threshold); err != nil {
		return nil, err
	}
	return w, nil
}

// The config comparison's sizes: small, since the slowest row runs with
// 50 ms hops.
const configReps, configCalls, configTurns = 3, 5, 50

func compareConfig(ctx context.Context, c namedConfig, cfg Config) (configRow, error) {
	e, err := Start(Options{DynamicConfig: c.dc, SQLiteFile: c.sqlite})
	if err != nil {
		return configRow{}, err
	}
	defer e.Close()
	tc, err := e.ToolCalls(ctx, configCalls, configReps)
	if err != nil {
		return configRow{}, err
	}
	tp, err := e.Throughput(ctx, cfg.TPCalls, cfg.InFlight, configTurns, 1)
	if err != nil {
		return configRow{}, err
	}
	row := configRow{
		Name:    c.name,
		BareHop: Median(tc.BareN) / configCalls, CallHop: Median(tc.Tollgate) / configCalls,
		BareRate: MedianFloat(tp.BareN), CallRate: MedianFloat(tp.Tollgate),
	}
	if len(c.dc) > 0 && !c.sqlite {
		row.Name += ": " + describe(c.dc)
	}
	if tc.Hops.WFTs > 0 {
		row.Dispatch = tc.Hops.WFTQueue / time.Duration(tc.Hops.WFTs)
	}
	return row, nil
}

type historyRuns struct {
	noop10, noop20, noop10x3 HistorySize
	blob                     []HistorySize
	bare                     []HistorySize
	long                     LongTurnSize
}

// Row 5e: 100 model calls, 8 KiB (2,048 tokens) of tool output each,
// 204,800 tokens in all, against a 128,000-token window.
const (
	longSteps       = 100
	longOutputBytes = 8 << 10
	longWindow      = 128_000
)

var historySteps = []int{10, 25, 50}

func (e *Env) historyRuns(ctx context.Context) (*historyRuns, error) {
	var h historyRuns
	var err error
	if h.noop10, err = e.History(ctx, 10, 1, 0); err != nil {
		return nil, err
	}
	if h.noop20, err = e.History(ctx, 20, 1, 0); err != nil {
		return nil, err
	}
	if h.noop10x3, err = e.History(ctx, 10, 3, 0); err != nil {
		return nil, err
	}
	for _, n := range historySteps {
		t, err := e.History(ctx, n, 1, 5*1024)
		if err != nil {
			return nil, err
		}
		b, err := e.BareHistory(ctx, n, 5*1024)
		if err != nil {
			return nil, err
		}
		h.blob, h.bare = append(h.blob, t), append(h.bare, b)
	}
	if h.long, err = e.LongTurn(ctx, longSteps, longOutputBytes, longWindow); err != nil {
		return nil, fmt.Errorf("long turn: %w", err)
	}
	return &h, nil
}

func runMicros() []microResult {
	var rs []microResult
	for _, m := range Micros() {
		r := testing.Benchmark(m.F)
		rs = append(rs, microResult{Name: m.Name, What: m.What, NsPerOp: r.NsPerOp(), BytesPerOp: r.AllocedBytesPerOp(), AllocsPerOp: r.AllocsPerOp()})
	}
	return rs
}
