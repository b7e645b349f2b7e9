package bench

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/report-*.md from the canned results")

// TestReportGolden renders the report from canned results and compares
// it with testdata/report-*.md, which the report code wrote from the same
// numbers before its words moved into results.md.tmpl. After a deliberate
// change of wording, rewrite them with -update and read the diff.
func TestReportGolden(t *testing.T) {
	for name, m := range map[string]*measurements{"misses": cannedMisses(), "passes": cannedPasses()} {
		t.Run(name, func(t *testing.T) {
			got, err := render(m)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "report-"+name+".md")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("report differs from %s (rerun with -update if the change is meant); got:\n%s", path, got)
			}
		})
	}
}

// Canned results for the report's golden tests: made-up numbers in the
// shape of a real run. cannedMisses misses every goal and has every
// optional section; cannedPasses meets every goal and has none.

func msD(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

func msDs(fs ...float64) []time.Duration {
	ds := make([]time.Duration, len(fs))
	for i, f := range fs {
		ds[i] = msD(f)
	}
	return ds
}

func cannedMicros() []microResult {
	nums := map[string][3]int64{
		"EncodeOutcome":    {7034, 2705, 4},
		"DecodeOutcome":    {22431, 8536, 51},
		"EncodeCard":       {9067, 3601, 11},
		"DecodeCard":       {26150, 9136, 65},
		"RenderCard":       {1309, 1704, 18},
		"TranscriptAppend": {861791, 3384, 26},
		"TranscriptLoad50": {2009684, 1706455, 2212},
	}
	var rs []microResult
	for _, m := range Micros() {
		n := nums[m.Name]
		rs = append(rs, microResult{Name: m.Name, What: m.What, NsPerOp: n[0], BytesPerOp: n[1], AllocsPerOp: n[2]})
	}
	return rs
}

// cannedHistory is benchmark 5 with the 25- and 50-step turns' history
// sizes given.
func cannedHistory(bytes25, bytes50 int64) *historyRuns {
	return &historyRuns{
		noop10:   HistorySize{Steps: 10, Calls: 1, Events: 132, Bytes: 27300},
		noop20:   HistorySize{Steps: 20, Calls: 1, Events: 252, Bytes: 52900},
		noop10x3: HistorySize{Steps: 10, Calls: 3, Events: 192, Bytes: 46100},
		blob: []HistorySize{
			{Steps: 10, Calls: 1, OutputBytes: 5120, Events: 132, Bytes: 235520, MaxEvent: 106906, Payloads: 0, Transcripts: 54579},
			{Steps: 25, Calls: 1, OutputBytes: 5120, Events: 312, Bytes: bytes25, MaxEvent: 5939, Payloads: 266650, Transcripts: 136294},
			{Steps: 50, Calls: 1, OutputBytes: 5120, Events: 612, Bytes: bytes50, MaxEvent: 5939, Payloads: 533094, Transcripts: 272486},
		},
		bare: []HistorySize{
			{Steps: 10, Calls: 1, OutputBytes: 5120, Events: 65, Bytes: 58368},
			{Steps: 25, Calls: 1, OutputBytes: 5120, Events: 155, Bytes: 145408},
			{Steps: 50, Calls: 1, OutputBytes: 5120, Events: 305, Bytes: 290509},
		},
		long: LongTurnSize{Steps: 100, OutputBytes: 8192, Window: 128000, OutputTokens: 204800, Compactions: 2,
			FirstBytes: 18000, LastBytes: 18500, Events: 1220, Bytes: 1900000, Elapsed: 9 * time.Second},
	}
}

func mem(heapKiB, rssMiB, anonMiB, hwmMiB float64, goroutines int) Mem {
	return Mem{HeapLive: uint64(heapKiB * 1024), RSS: uint64(rssMiB * (1 << 20)), RSSAnon: uint64(anonMiB * (1 << 20)),
		HWM: uint64(hwmMiB * (1 << 20)), Goroutines: goroutines}
}

func cannedMisses() *measurements {
	return &measurements{
		Machine:       "Canned CPU, 2 cores (GOMAXPROCS 2), go1.26.8 linux/amd64, 2026-01-02 03:04 UTC; load average at start 1.68 2.03 2.52",
		DynamicConfig: describe(TunedDynamicConfig()),
		Reps:          5, CallReps: 15, TPReps: 3, InFlight: 50,
		ToolCalls: &ToolCalls{
			N:           10,
			Tollgate:    msDs(128.4, 131.2, 125.9),
			Local:       msDs(71.5, 74.0, 69.8),
			BareN:       msDs(53.2, 55.0, 51.7),
			BareLoop:    msDs(98.3, 96.1, 101.4),
			Hops:        HopBreakdown{WFTQueue: msD(75.2), WFTRun: msD(132.0), Activity: msD(150.6), WFTs: 66, Activities: 63},
			LocalHops:   HopBreakdown{WFTQueue: msD(40.1), WFTRun: msD(88.0), Activity: msD(70.2), WFTs: 36, Activities: 33},
			LoopHops:    HopBreakdown{WFTQueue: msD(78.5), WFTRun: msD(123.4), Activity: msD(86.3), WFTs: 66, Activities: 63},
			InCallModel: msD(1.61), InRunTool: msD(0.07), InBare: msD(0.01),
			Profile: &CPUProfile{
				Calls: 50, Wall: msD(402.0), CPU: msD(655.0),
				Top: []ProfileFunc{
					{Name: "internal/runtime/syscall/linux.Syscall6", Flat: msD(120.0), Cum: msD(120.0)},
					{Name: "runtime.mallocgc", Flat: msD(41.0), Cum: msD(88.0)},
					{Name: "google.golang.org/protobuf/internal/impl.(*MessageInfo).unmarshalPointer", Flat: msD(20.0), Cum: msD(61.0)},
				},
				Areas: []ProfileFunc{
					{Name: "Go runtime (GC, scheduler, allocation)", Flat: msD(260.0)},
					{Name: "system calls", Flat: msD(150.0)},
					{Name: "Temporal server", Flat: msD(120.0)},
					{Name: "Tollgate", Flat: msD(25.0)},
					{Name: "other", Flat: msD(100.0)},
				},
			},
			ProfileTurns: 5,
		},
		Eager: &EagerStart{
			Eager: msDs(6.1, 5.8, 6.4, 7.0), Plain: msDs(8.9, 9.4, 8.7, 10.2),
			BareEager: msDs(4.2, 4.0, 4.5, 4.4), BarePlain: msDs(6.6, 6.9, 6.4, 7.3),
		},
		Tmpfs: &ToolCalls{
			N: 10, Tollgate: msDs(109.0, 112.5, 107.3), BareN: msDs(50.1, 49.8, 51.0), BareLoop: msDs(100.4, 99.0, 103.3),
			InCallModel: msD(0.19), InRunTool: msD(0.06), InBare: msD(0.01),
		},
		Resume: &Resume{
			TollgateAccept: msDs(1.9, 2.1, 2.4, 1.8, 2.2, 2.6, 5.3, 2.0, 2.3, 9.8),
			BareAccept:     msDs(1.5, 1.6, 1.4, 1.7, 1.5, 1.8, 2.2, 1.6, 1.9, 3.1),
			TollgateSend:   msDs(3.8, 3.9, 4.1, 3.7, 4.0, 4.4, 7.2, 3.9, 4.2, 11.5),
			BareSend:       msDs(3.5, 3.6, 3.4, 3.7, 3.5, 3.9, 4.2, 3.6, 3.8, 5.0),
		},
		Throughput: &Throughput{
			Calls: 3, InFlight: 50, Total: 150,
			Tollgate: []float64{34.0, 29.9, 28.6}, BareN: []float64{62.4, 59.6, 64.8}, BareLoop: []float64{45.3, 43.9, 46.8},
			Local:   []float64{44.0, 41.2, 43.9},
			RPCRate: [4]float64{885.2, 908.7, 972.1, 901.5},
		},
		History: cannedHistory(3179520, 6330000),
		Parked: [2]*Parked{
			{
				Side: sideTollgate, Cache: 250, Counts: []int{0, 250, 500, 1000, 2000},
				Points: []Mem{mem(9390, 137.86, 15.48, 140.2, 36), mem(16188, 159.25, 36.63, 161.0, 783), mem(16650, 166.59, 43.96, 168.3, 783),
					mem(17900, 168.11, 45.48, 170.9, 783), mem(21300, 175.07, 52.39, 179.67, 783)},
				Park: 27149 * time.Millisecond, Drain: 33912 * time.Millisecond, After: mem(9861, 144.11, 21.37, 179.67, 36),
			},
			{
				Side: sideBare, Cache: 250, Counts: []int{0, 250, 500, 1000, 2000},
				Points: []Mem{mem(9062, 137.05, 14.94, 139.0, 36), mem(11356, 144.80, 22.56, 146.1, 285), mem(11376, 146.54, 24.23, 148.0, 285),
					mem(11397, 149.14, 26.84, 151.2, 285), mem(11407, 149.91, 27.55, 157.52, 285)},
				Park: 17231 * time.Millisecond, Drain: 19466 * time.Millisecond, After: mem(9277, 140.85, 18.43, 157.52, 36),
			},
		},
		Recovery: &Recovery{
			N: 5, Delay: 3 * time.Second,
			Tollgate: msDs(29500, 30100, 29800, 31200, 30050),
			Bare:     msDs(28900, 29000, 29300, 29100, 28800),
			Calls:    [2]int64{10, 10},
		},
		Gateway: &Gateway{
			Parked: 1000, Limit: 50, Listed: 50,
			HTTPSend:   msDs(9.8, 10.4, 11.2, 9.9, 10.8, 12.5, 10.1, 10.6, 35.2, 11.0),
			UpdateSend: msDs(7.2, 7.5, 7.9, 7.1, 7.6, 8.4, 7.3, 7.7, 21.9, 7.8),
			List:       msDs(251.3, 262.8, 248.9, 270.4, 255.0, 301.7, 259.2, 244.6, 266.1, 612.5),
			BareList:   msDs(7.1, 7.4, 6.9, 7.8, 7.2, 9.5, 7.0, 7.3, 7.6, 18.2),
			Queries:    msDs(182.0, 190.4, 178.8, 195.1, 184.3, 210.7, 186.9, 179.5, 188.2, 402.6),
		},
		Micros: cannedMicros(),
		Configs: []configRow{
			{Name: "server defaults", BareHop: msD(59.6), CallHop: msD(120.4), Dispatch: msD(42.9), BareRate: 72.4, CallRate: 35.2},
			{Name: "1 task queue partition: `matching.numtaskqueuereadpartitions=1`, `matching.numtaskqueuewritepartitions=1`", BareHop: msD(59.8), CallHop: msD(119.7), Dispatch: msD(43.4), BareRate: 66.0, CallRate: 34.8},
			{Name: "queue processors at 10000 reads/s: " + describe(fastQueues()), BareHop: msD(5.88), CallHop: msD(14.5), Dispatch: msD(1.20), BareRate: 71.6, CallRate: 38.1},
			{Name: "both (used below): " + describe(TunedDynamicConfig()), BareHop: msD(5.82), CallHop: msD(13.9), Dispatch: msD(1.17), BareRate: 73.0, CallRate: 38.4},
			{Name: "both, SQLite in a file as `worker --dev` keeps it (WAL, synchronous=FULL)", BareHop: msD(14.6), CallHop: msD(29.8), Dispatch: msD(3.47), BareRate: 16.2, CallRate: 9.4},
		},
		Waits:     &lostNotifications{N: 40, Interval: time.Second, Threshold: 500 * time.Millisecond, Worst: msD(1003.4), Stalls: [2]int{2, 1}},
		ManyCalls: cannedManyCalls(10000, 81, 20),
		Elapsed:   226 * time.Second,
		Repolls:   3,
	}
}

// cannedManyCalls is benchmark 10: a turn of calls calls, whose per-call
// time is perCall ms and whose worker's live heap peaks at peak MiB after
// 12 MiB at its first continue-as-new.
func cannedManyCalls(calls int, perCall, peak float64) *ManyCalls {
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	m := &ManyCalls{
		Calls: calls, ShortCalls: 100, Answered: calls, ToolCalls: calls, Compactions: 9, Window: 32_000,
		Long:  time.Duration(float64(calls) * perCall * float64(time.Millisecond)),
		Short: msDs(2500, 2600, 2550), Bare: msDs(1700, 1650, 1720),
		Runs: []RunSize{{Events: 4101, Bytes: 870 << 10, Started: t0}, {Events: 4105, Bytes: 880 << 10, Started: t0.Add(time.Minute)}},
	}
	for i, heap := range []float64{10, 12, 13, peak} {
		m.Mem = append(m.Mem, MemSample{At: t0.Add(time.Duration(i) * 40 * time.Second), Mem: Mem{HeapLive: uint64(heap * (1 << 20)), RSSAnon: uint64(2 * heap * (1 << 20))}})
	}
	return m
}

func cannedPasses() *measurements {
	return &measurements{
		Machine:       "Canned CPU, 4 cores (GOMAXPROCS 4), go1.26.8 linux/amd64, 2026-01-02 03:04 UTC",
		DynamicConfig: describe(TunedDynamicConfig()),
		Reps:          2, CallReps: 3, TPReps: 3, InFlight: 10,
		ToolCalls: &ToolCalls{
			N:           3,
			Tollgate:    msDs(30.1, 31.0),
			Local:       msDs(28.0, 28.5),
			BareN:       msDs(26.2, 25.9),
			BareLoop:    msDs(29.4, 30.2),
			Hops:        HopBreakdown{WFTQueue: msD(8.1), WFTRun: msD(15.3), Activity: msD(12.0), WFTs: 16, Activities: 14},
			LocalHops:   HopBreakdown{WFTQueue: msD(5.0), WFTRun: msD(11.9), Activity: msD(7.5), WFTs: 10, Activities: 8},
			LoopHops:    HopBreakdown{WFTQueue: msD(8.4), WFTRun: msD(14.9), Activity: msD(10.2), WFTs: 16, Activities: 14},
			InCallModel: msD(1.20), InRunTool: msD(0.05), InBare: msD(0.01),
		},
		Resume: &Resume{
			TollgateAccept: msDs(1.7, 1.8, 1.9, 2.0, 2.1),
			BareAccept:     msDs(1.7, 1.9, 1.8, 2.1, 2.2),
			TollgateSend:   msDs(3.1, 3.2, 3.3, 3.4, 3.5),
			BareSend:       msDs(3.0, 3.2, 3.3, 3.5, 3.6),
		},
		Throughput: &Throughput{
			Calls: 3, InFlight: 10, Total: 20,
			Tollgate: []float64{41.0, 40.2, 39.9}, BareN: []float64{44.1, 45.0, 43.7}, BareLoop: []float64{42.5, 41.9, 43.0},
			Local:   []float64{40.3, 41.6, 39.0},
			RPCRate: [4]float64{402.1, 398.8, 410.0, 405.2},
		},
		History: cannedHistory(317952, 633037),
		Parked: [2]*Parked{
			{
				Side: sideTollgate, Cache: 20, Counts: []int{0, 20},
				Points: []Mem{mem(9390, 137.86, 15.48, 140.2, 36), mem(9650, 139.25, 16.63, 141.0, 96)},
				Park:   1249 * time.Millisecond, Drain: 502 * time.Millisecond, After: mem(9461, 138.11, 15.97, 141.0, 36),
			},
			{
				Side: sideBare, Cache: 20, Counts: []int{0, 20},
				Points: []Mem{mem(9062, 137.05, 14.94, 139.0, 36), mem(9250, 137.80, 15.56, 139.6, 56)},
				Park:   982 * time.Millisecond, Drain: 455 * time.Millisecond, After: mem(9101, 137.40, 15.10, 139.6, 36),
			},
		},
		ManyCalls: cannedManyCalls(10000, 26, 14),
		Elapsed:   41 * time.Second,
	}
}

// TestReportSectionsOptional: a run that left sections out renders
// without them (TestRecoveryRow renders benchmark 7 alone).
func TestReportSectionsOptional(t *testing.T) {
	if _, err := render(&measurements{}); err != nil {
		t.Fatal(err)
	}
	got, err := render(&measurements{Recovery: cannedMisses().Recovery, Elapsed: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 7a |", "- 7b (", "**7. Recovery after SIGKILL.**"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| 1a |") {
		t.Errorf("report has benchmark 1 without its results:\n%s", got)
	}
}

// TestLocalRowsNotAvailable: when the local-tool turns ran their calls as
// activities (a worker without local tools), 1a and 4a say so instead of
// passing off activity tools as local ones, and no goal counts them.
func TestLocalRowsNotAvailable(t *testing.T) {
	m := cannedPasses()
	m.ToolCalls.LocalHops.Activities = m.ToolCalls.Hops.Activities
	got, err := render(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| 1a |", "| 4a |"} {
		line := lineWith(got, row)
		if !strings.Contains(line, "not available: this worker ran the local tools' calls as activities") || strings.Contains(line, "pass") {
			t.Errorf("row %s should be not available:\n%s", row, line)
		}
	}
	if strings.Contains(got, "**Goals missed, and why.**") {
		t.Errorf("rows that were not available counted as misses:\n%s", got)
	}
}

func lineWith(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
