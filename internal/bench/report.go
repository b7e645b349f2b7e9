package bench

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"text/template"
	"time"

	"github.com/tollgate-dev/tollgate/activities"
)

// The report's words live in results.md.tmpl, beside the report it
// writes; this file turns a run's measurements into the numbers the
// template quotes, and the template formats them with reportFuncs.
//
//go:embed results.md.tmpl
var reportText string

var reportTmpl = template.Must(template.New("results.md.tmpl").Funcs(reportFuncs).Parse(reportText))

var reportFuncs = template.FuncMap{
	"ms":      ms,
	"secs":    secs,
	"x":       x,
	"bytes":   bytesOf,
	"per":     per,
	"verdict": verdict,
	"ordinal": ordinal,
	"list":    list,
}

// measurements is what one suite run measured: every number the report
// quotes, before any of it is derived or formatted.
type measurements struct {
	Machine string
	// DynamicConfig describes the tuned config both sides ran with.
	DynamicConfig string
	// Repetitions of the macro benchmarks, of benchmark 1 and of 4.
	Reps, CallReps, TPReps int
	// InFlight is the turns in flight of the config comparison.
	InFlight int

	ToolCalls *ToolCalls
	// Eager is row 2d; nil when not run.
	Eager *EagerStart
	// Tmpfs is benchmark 1 again with the data directory on tmpfs; nil
	// without /dev/shm.
	Tmpfs *ToolCalls
	// Encrypted is benchmark 1 again with payload encryption on; nil
	// when not run.
	Encrypted  *ToolCalls
	Resume     *Resume
	Throughput *Throughput
	History    *historyRuns
	// Parked is benchmark 3: Tollgate, bare.
	Parked   [2]*Parked
	Recovery *Recovery // nil when not run
	Sessions *Sessions // nil when not run
	// ManyCalls is benchmark 10; nil when not run.
	ManyCalls *ManyCalls
	Gateway   *Gateway           // nil when not run
	Micros    []microResult      // nil when not run
	Configs   []configRow        // in configs() order; nil when not compared
	Waits     *lostNotifications // with Configs

	Elapsed time.Duration
	Repolls int64
}

// microResult is one micro benchmark's result.
type microResult struct {
	Name, What                       string
	NsPerOp, BytesPerOp, AllocsPerOp int64
}

// configRow is one row of the config comparison.
type configRow struct {
	Name                       string
	BareHop, CallHop, Dispatch time.Duration
	// Turns per second, 3 activities (bare) or 3 tool calls (Tollgate).
	BareRate, CallRate float64
}

// lostNotifications is the lost-notification run: N waits a side on a
// server whose long poll expires after Interval, Stalls of them
// (Tollgate, bare) longer than Threshold after the workflow returned,
// Worst the longest.
type lostNotifications struct {
	N                          int
	Interval, Threshold, Worst time.Duration
	Stalls                     [2]int
}

// render is the report for m.
func render(m *measurements) (string, error) {
	var b strings.Builder
	if err := reportTmpl.ExecuteTemplate(&b, "results.md", newReport(m)); err != nil {
		return "", fmt.Errorf("bench report: %w", err)
	}
	return b.String(), nil
}

// report is the template's data: each section's numbers as the prose
// quotes them, nil for a section the run left out, and whether each goal
// was met (the goals' thresholds are here, their wording in the template).
type report struct {
	Machine, DynamicConfig string
	Reps, CallReps, TPReps int
	Elapsed                time.Duration
	Repolls                int64

	Calls *callsReport
	Tmpfs *tmpfsReport
	// Encrypted is row 1f.
	Encrypted *encryptedReport
	Resume    *resumeReport
	Eager     *eagerReport
	// Profile is benchmark 1's CPU profile; nil when not taken.
	Profile    *profileReport
	Parked     *parkedReport
	Throughput *throughputReport
	History    *historyReport
	Micro      *microReport
	Configs    *configsReport
	Recovery   *recoveryReport
	Sessions   *sessionReport
	Gateway    *gatewayReport
	ManyCalls  *manyCallsReport
	// Missed is whether any goal was missed.
	Missed bool
}

func newReport(m *measurements) *report {
	r := &report{
		Machine: m.Machine, DynamicConfig: m.DynamicConfig,
		Reps: m.Reps, CallReps: m.CallReps, TPReps: m.TPReps,
		Elapsed: m.Elapsed.Round(time.Second), Repolls: m.Repolls,
	}
	if m.ToolCalls != nil {
		r.Calls = newCallsReport(m.ToolCalls)
		r.Missed = r.Missed || (r.Calls.LocalOK && !r.Calls.MetLocal) || !r.Calls.MetLoop
		if p := m.ToolCalls.Profile; p != nil {
			r.Profile = newProfileReport(p, m.ToolCalls)
		}
		if m.Tmpfs != nil {
			r.Tmpfs = newTmpfsReport(m.Tmpfs, m.ToolCalls)
		}
		if m.Encrypted != nil {
			r.Encrypted = newEncryptedReport(m.Encrypted, m.ToolCalls)
			r.Missed = r.Missed || !r.Encrypted.Met
		}
		if m.Micros != nil {
			r.Micro = newMicroReport(m.Micros, r.Calls.PerCall)
		}
	}
	if m.Resume != nil {
		r.Resume = newResumeReport(m.Resume)
		r.Missed = r.Missed || !r.Resume.Met50 || !r.Resume.Met99
	}
	if m.Eager != nil {
		r.Eager = newEagerReport(m.Eager)
	}
	if m.Parked[0] != nil && m.Parked[1] != nil {
		r.Parked = newParkedReport(m.Parked[0], m.Parked[1])
		r.Missed = r.Missed || !r.Parked.Flat || !r.Parked.MetHeap || !r.Parked.MetDrain
	}
	if m.Throughput != nil {
		r.Throughput = newThroughputReport(m.Throughput, m.ToolCalls)
		r.Missed = r.Missed || (r.Throughput.LocalOK && !r.Throughput.MetLocal) || !r.Throughput.MetLoop
		if m.Configs != nil {
			r.Configs = newConfigsReport(m, m.Throughput)
		}
	}
	if m.History != nil {
		r.History = newHistoryReport(m.History)
		r.Missed = r.Missed || !r.History.MetSize || !r.History.MetLinear || !r.History.Long.Flat()
	}
	if m.Recovery != nil {
		r.Recovery = newRecoveryReport(m.Recovery)
		r.Missed = r.Missed || !r.Recovery.Met
	}
	if m.Sessions != nil {
		r.Sessions = newSessionReport(m.Sessions)
		r.Missed = r.Missed || !r.Sessions.Met()
	}
	if m.ManyCalls != nil {
		r.ManyCalls = newManyCallsReport(m.ManyCalls)
		r.Missed = r.Missed || !r.ManyCalls.Met()
	}
	if m.Gateway != nil {
		r.Gateway = newGatewayReport(m.Gateway)
		r.Missed = r.Missed || !r.Gateway.MetResume || !r.Gateway.MetList
	}
	return r
}

// The goals' thresholds (their wording is in results.md.tmpl).
const (
	// LocalCallGoal bounds 1a, a call with local tools against a bare
	// workflow's activity; LoopCallGoal 1b, a call with activity tools
	// against the bare loop's.
	LocalCallGoal, LoopCallGoal = 1.25, 1.05
	// StreamingCallGoal bounds 1b with streaming on (TestStreamingRow1b).
	StreamingCallGoal = 1.08
	// ThroughputGoal is the least ratio of 4a and 4b, DrainGoal of 3d.
	ThroughputGoal, DrainGoal = 0.8, 0.8
	// HeapGoal bounds 3a, a cached parked turn's heap against bare's.
	HeapGoal = 1.5
)

// callsReport is benchmark 1 (rows 1a, 1b, 1d).
type callsReport struct {
	*ToolCalls
	// Medians per call and per whole turn.
	PerCall, PerCallLocal, PerCallBareN, PerCallLoop time.Duration
	Turn, TurnLocal, TurnBareN, TurnLoop             time.Duration
	// Extra is what a call costs over a bare workflow's activity, with
	// activity tools; LocalExtra with local tools.
	Extra, LocalExtra             time.Duration
	RatioN, RatioLocal, RatioLoop float64
	// RepRatios are the per-repetition ratios against the bare loop,
	// LocalRepRatios those of local tools against the bare workflow.
	RepRatios, LocalRepRatios []float64
	// LocalOK says the local-tool turns ran their tools locally (else
	// 1a is not available).
	LocalOK           bool
	MetLocal, MetLoop bool
	// Per Tollgate turn, measured (activity tools; local tools); and by
	// construction: a turn's model calls (N+1), the bare loop's
	// activities (2N+1), the bare workflow's workflow tasks (N+1).
	Activities, WFTs, LocalActivities, LocalWFTs int
	ModelCalls, LoopActivities, BareWFTs         int
}

func newCallsReport(tc *ToolCalls) *callsReport {
	n, reps := time.Duration(tc.N), len(tc.Tollgate)
	r := &callsReport{
		ToolCalls: tc,
		Turn:      Median(tc.Tollgate), TurnBareN: Median(tc.BareN), TurnLoop: Median(tc.BareLoop),
		RatioN: repRatio(tc.Tollgate, tc.BareN), RepRatios: repRatios(tc.Tollgate, tc.BareLoop),
		Activities: tc.Hops.Activities / reps, WFTs: tc.Hops.WFTs / reps,
		ModelCalls: tc.N + 1, LoopActivities: 2*tc.N + 1, BareWFTs: tc.N + 1,
		LocalOK: tc.LocalTools(),
	}
	r.RatioLoop = MedianFloat(r.RepRatios)
	r.PerCall, r.PerCallBareN, r.PerCallLoop = r.Turn/n, r.TurnBareN/n, r.TurnLoop/n
	r.Extra = (r.Turn - r.TurnBareN) / n
	if len(tc.Local) > 0 {
		r.TurnLocal = Median(tc.Local)
		r.PerCallLocal, r.LocalExtra = r.TurnLocal/n, (r.TurnLocal-r.TurnBareN)/n
		r.LocalRepRatios = repRatios(tc.Local, tc.BareN)
		r.RatioLocal = MedianFloat(r.LocalRepRatios)
		r.LocalActivities, r.LocalWFTs = tc.LocalHops.Activities/len(tc.Local), tc.LocalHops.WFTs/len(tc.Local)
	}
	r.MetLocal, r.MetLoop = r.LocalOK && r.RatioLocal <= LocalCallGoal, r.RatioLoop <= LoopCallGoal
	return r
}

// eagerReport is row 2d.
type eagerReport struct {
	*EagerStart
	Eager50, Eager99, Plain50, Plain99 time.Duration
	BareEager50, BarePlain50           time.Duration
	Ratio, BareRatio                   float64
}

func newEagerReport(e *EagerStart) *eagerReport {
	r := &eagerReport{
		EagerStart: e,
		Eager50:    Percentile(e.Eager, 50), Eager99: Percentile(e.Eager, 99),
		Plain50: Percentile(e.Plain, 50), Plain99: Percentile(e.Plain, 99),
		BareEager50: Percentile(e.BareEager, 50), BarePlain50: Percentile(e.BarePlain, 50),
	}
	r.Ratio, r.BareRatio = ratio(float64(r.Eager50), float64(r.Plain50)), ratio(float64(r.BareEager50), float64(r.BarePlain50))
	return r
}

// profileReport is benchmark 1's CPU profile summary.
type profileReport struct {
	*CPUProfile
	// Turns of N calls were profiled; Local says with local tools.
	Turns, N int
	Local    bool
	// PerCall is the CPU time per tool call, WallPerCall the wall time.
	PerCall, WallPerCall time.Duration
	// Share is each function's (or area's) percentage of the CPU time.
	Top, Areas []profileRow
}

type profileRow struct {
	Name      string
	Flat, Cum time.Duration
	Share     float64
}

func newProfileReport(p *CPUProfile, tc *ToolCalls) *profileReport {
	r := &profileReport{CPUProfile: p, Turns: tc.ProfileTurns, N: tc.N, Local: tc.LocalTools(), PerCall: p.PerCall()}
	if p.Calls > 0 {
		r.WallPerCall = p.Wall / time.Duration(p.Calls)
	}
	row := func(f ProfileFunc) profileRow {
		return profileRow{Name: f.Name, Flat: f.Flat, Cum: f.Cum, Share: 100 * ratio(float64(f.Flat), float64(p.CPU))}
	}
	for _, f := range p.Top {
		r.Top = append(r.Top, row(f))
	}
	for _, f := range p.Areas {
		r.Areas = append(r.Areas, row(f))
	}
	return r
}

// tmpfsReport is row 1c: benchmark 1 with the data directory on tmpfs.
type tmpfsReport struct {
	PerCall, PerCallLoop time.Duration
	Ratio                float64
	// InCallModel is the mean time inside CallModel on tmpfs, OnDisk in
	// benchmark 1.
	InCallModel, OnDisk time.Duration
}

func newTmpfsReport(shm, disk *ToolCalls) *tmpfsReport {
	n := time.Duration(shm.N)
	return &tmpfsReport{
		PerCall: Median(shm.Tollgate) / n, PerCallLoop: Median(shm.BareLoop) / n,
		Ratio:       repRatio(shm.Tollgate, shm.BareLoop),
		InCallModel: shm.InCallModel, OnDisk: disk.InCallModel,
	}
}

// encryptedReport is row 1f: benchmark 1's turn with payload encryption
// on, against the same turn without it (benchmark 1 itself).
type encryptedReport struct {
	PerCall, PerCallPlain time.Duration
	Ratio                 float64
	Met                   bool
}

// encryptionGoal is the bound on what encryption may add per call.
const encryptionGoal = 1.1

func newEncryptedReport(enc, plain *ToolCalls) *encryptedReport {
	r := &encryptedReport{
		PerCall:      Median(enc.Tollgate) / time.Duration(enc.N),
		PerCallPlain: Median(plain.Tollgate) / time.Duration(plain.N),
	}
	r.Ratio = ratio(float64(r.PerCall), float64(r.PerCallPlain))
	r.Met = r.Ratio <= encryptionGoal
	return r
}

// resumeReport is benchmark 2: percentiles from the update's acceptance
// (P50, P90, P99) and from its sending (Send50) to the tool's start.
type resumeReport struct {
	Samples                     int
	P50, P90, P99, Send50       time.Duration
	BareP50, BareP90, BareP99   time.Duration
	BareSend50                  time.Duration
	Ratio50, Ratio99, SendRatio float64
	Met50, Met99                bool
	// Rank is the p99 sample's place counted from the highest.
	Rank int
}

func newResumeReport(rs *Resume) *resumeReport {
	r := &resumeReport{
		Samples: len(rs.TollgateAccept),
		P50:     Percentile(rs.TollgateAccept, 50), P90: Percentile(rs.TollgateAccept, 90), P99: Percentile(rs.TollgateAccept, 99),
		BareP50: Percentile(rs.BareAccept, 50), BareP90: Percentile(rs.BareAccept, 90), BareP99: Percentile(rs.BareAccept, 99),
		Send50: Percentile(rs.TollgateSend, 50), BareSend50: Percentile(rs.BareSend, 50),
	}
	r.Ratio50, r.Ratio99 = ratio(float64(r.P50), float64(r.BareP50)), ratio(float64(r.P99), float64(r.BareP99))
	r.SendRatio = ratio(float64(r.Send50), float64(r.BareSend50))
	r.Met50, r.Met99 = r.Ratio50 <= 1.25, r.Ratio99 <= 1.25
	r.Rank = r.Samples - int(math.Ceil(0.99*float64(r.Samples))) + 1
	return r
}

// parkedReport is benchmark 3: memory while Cached turns are parked in a
// cache of Cache, and growth from there to Parked.
type parkedReport struct {
	Cache, Cached, Parked int
	Tollgate, Bare        parkedSide
	HeapRatio, DrainRatio float64
	// Flat is the goal: beyond the cache, each of Tollgate's growths is
	// at most a tenth of a cached turn's cost.
	Flat bool
	// MetHeap and MetDrain are 3a's and 3d's goals.
	MetHeap, MetDrain bool
	Rows              []parkedRow
}

// parkedSide is one side of benchmark 3. Costs are bytes per parked
// turn while cached; growths bytes per 1,000 parked beyond the cache.
type parkedSide struct {
	HeapPerTurn, AnonPerTurn float64
	HeapGrowth, AnonGrowth   float64
	Last                     Mem
	// Park and Drain are rounded to a tenth of a second.
	Park, Drain time.Duration
	DrainRate   float64 // turns a second

	heapBeyond, anonBeyond float64 // growth per parked turn
}

type parkedRow struct {
	Label          string
	Tollgate, Bare Mem
}

func newParkedReport(tg, bare *Parked) *parkedReport {
	const cached = 1 // the checkpoint at the cache's size
	last := len(tg.Counts) - 1
	side := func(p *Parked) parkedSide {
		perTurn := func(field func(Mem) uint64, i, j int) float64 {
			return (float64(field(p.Points[j])) - float64(field(p.Points[i]))) / float64(p.Counts[j]-p.Counts[i])
		}
		heap := func(m Mem) uint64 { return m.HeapLive }
		anon := func(m Mem) uint64 { return m.RSSAnon }
		s := parkedSide{
			HeapPerTurn: perTurn(heap, 0, cached), AnonPerTurn: perTurn(anon, 0, cached),
			Last: p.Points[last],
			Park: p.Park.Round(100 * time.Millisecond), Drain: p.Drain.Round(100 * time.Millisecond),
			DrainRate: float64(p.Counts[last]) / p.Drain.Seconds(),
		}
		if last > cached {
			s.heapBeyond, s.anonBeyond = perTurn(heap, cached, last), perTurn(anon, cached, last)
		}
		s.HeapGrowth, s.AnonGrowth = 1000*s.heapBeyond, 1000*s.anonBeyond
		return s
	}
	r := &parkedReport{
		Cache: tg.Cache, Cached: tg.Counts[cached], Parked: tg.Counts[last],
		Tollgate: side(tg), Bare: side(bare),
	}
	t := r.Tollgate
	r.HeapRatio = ratio(t.HeapPerTurn, r.Bare.HeapPerTurn)
	r.DrainRatio = ratio(t.DrainRate, r.Bare.DrainRate)
	r.Flat = t.heapBeyond <= 0.1*t.HeapPerTurn && t.anonBeyond <= 0.1*t.AnonPerTurn
	r.MetHeap, r.MetDrain = r.HeapRatio <= HeapGoal, r.DrainRatio >= DrainGoal
	for i, c := range tg.Counts {
		r.Rows = append(r.Rows, parkedRow{fmt.Sprint(c), tg.Points[i], bare.Points[i]})
	}
	r.Rows = append(r.Rows, parkedRow{"after drain", tg.After, bare.After})
	return r
}

// throughputReport is benchmark 4 (rows 4a, 4b).
type throughputReport struct {
	*Throughput
	// Medians, turns a second.
	Rate, LocalRate, BareRate, LoopRate float64
	RatioN, RatioLocal, RatioLoop       float64
	// LocalOK says benchmark 1 saw local tools run locally (else 4a is
	// not available).
	LocalOK           bool
	MetLocal, MetLoop bool
	// By construction: a turn's activities (2×Calls+1) and workflow
	// tasks (2×Calls+2), with local tools (Calls+1, Calls+2), the bare
	// workflow's workflow tasks (Calls+1).
	TurnActivities, TurnWFTs, LocalActivities, LocalWFTs, BareWFTs int
}

func newThroughputReport(tp *Throughput, tc *ToolCalls) *throughputReport {
	r := &throughputReport{
		Throughput: tp,
		Rate:       MedianFloat(tp.Tollgate), BareRate: MedianFloat(tp.BareN), LoopRate: MedianFloat(tp.BareLoop),
		RatioN: repRatio(tp.Tollgate, tp.BareN), RatioLoop: repRatio(tp.Tollgate, tp.BareLoop),
		TurnActivities: 2*tp.Calls + 1, TurnWFTs: 2*tp.Calls + 2, BareWFTs: tp.Calls + 1,
		LocalActivities: tp.Calls + 1, LocalWFTs: tp.Calls + 2,
		// Without benchmark 1 nothing checked the local runs; the
		// turns' own histories would tell, but 4 does not read them.
		LocalOK: len(tp.Local) > 0 && (tc == nil || tc.LocalTools()),
	}
	if len(tp.Local) > 0 {
		r.LocalRate, r.RatioLocal = MedianFloat(tp.Local), repRatio(tp.Local, tp.BareN)
	}
	r.MetLocal, r.MetLoop = r.LocalOK && r.RatioLocal >= ThroughputGoal, r.RatioLoop >= ThroughputGoal
	return r
}

// historyReport is benchmark 5.
type historyReport struct {
	// Per step and per extra call in a step, from the no-op runs.
	StepEvents, StepBytes, CallEvents, CallBytes float64
	// Last is the longest turn with 5 KiB outputs, BareLast its bare peer.
	Last, BareLast HistorySize
	Ratio          float64
	// Bytes per step, history alone and history plus stored bytes, over
	// the first and the second stretch of steps.
	HistPerStep, TotalPerStep [2]float64
	Linear                    float64
	MetSize, MetLinear        bool
	Rows                      []historyRow
	Long                      LongTurnSize
}

type historyRow struct{ Tollgate, Bare HistorySize }

func newHistoryReport(h *historyRuns) *historyReport {
	last := len(h.blob) - 1
	r := &historyReport{
		StepEvents: float64(h.noop20.Events-h.noop10.Events) / 10,
		StepBytes:  float64(h.noop20.Bytes-h.noop10.Bytes) / 10,
		CallEvents: float64(h.noop10x3.Events-h.noop10.Events) / 20,
		CallBytes:  float64(h.noop10x3.Bytes-h.noop10.Bytes) / 20,
		Last:       h.blob[last], BareLast: h.bare[last],
		Long: h.long,
	}
	r.Ratio = ratio(float64(r.Last.Bytes), float64(r.BareLast.Bytes))
	slope := func(a, b HistorySize, f func(HistorySize) int64) float64 {
		return float64(f(b)-f(a)) / float64(b.Steps-a.Steps)
	}
	hist := func(x HistorySize) int64 { return x.Bytes }
	total := func(x HistorySize) int64 { return x.Bytes + x.Payloads + x.Transcripts }
	for i := range r.HistPerStep {
		r.HistPerStep[i] = slope(h.blob[i], h.blob[i+1], hist)
		r.TotalPerStep[i] = slope(h.blob[i], h.blob[i+1], total)
	}
	r.Linear = ratio(r.TotalPerStep[1], r.TotalPerStep[0])
	r.MetSize, r.MetLinear = r.Last.Bytes <= 5<<20, r.Linear >= 0.85 && r.Linear <= 1.15
	for i := range h.blob {
		r.Rows = append(r.Rows, historyRow{h.blob[i], h.bare[i]})
	}
	return r
}

// microReport is benchmark 6.
type microReport struct {
	Rows []microResult
	// Codec is the encode + decode of an outcome and a card plus a
	// render, in µs; Share its percentage of PerCall, benchmark 1's time
	// per tool call.
	Codec, Share float64
	PerCall      time.Duration
	// Load is one load of a 50-step conversation; Loads all of a 50-step
	// turn's loads, one before each of its 51 model calls.
	Load, Loads time.Duration
}

func newMicroReport(rows []microResult, perCall time.Duration) *microReport {
	ns := map[string]time.Duration{}
	for _, m := range rows {
		ns[m.Name] = time.Duration(m.NsPerOp)
	}
	codec := ns["EncodeOutcome"] + ns["DecodeOutcome"] + ns["EncodeCard"] + ns["DecodeCard"] + ns["RenderCard"]
	return &microReport{
		Rows:  rows,
		Codec: float64(codec) / 1e3, Share: 100 * float64(codec) / float64(perCall), PerCall: perCall,
		Load: ns["TranscriptLoad50"], Loads: ns["TranscriptLoad50"] * 51 / 2,
	}
}

// configsReport is the dynamic config comparison and the lost
// notifications.
type configsReport struct {
	Rows []configRow
	// Each row's sizes: Runs runs of Calls tool calls, Turns turns with
	// InFlight in flight.
	Runs, Calls, Turns, InFlight int
	// The rows the findings compare.
	Default, Tuned, File configRow
	// Speedup is the tuned config's gain on a bare activity, FileRatio
	// the SQLite file's cost against the in-memory server.
	Speedup, FileRatio float64
	// MaxRPCs is the client's highest call rate in benchmark 4.
	MaxRPCs float64
	Waits   *lostNotifications
	// Stalled is the percentage of waits that stalled.
	Stalled float64
}

func newConfigsReport(m *measurements, tp *Throughput) *configsReport {
	def, tuned, file := m.Configs[0], m.Configs[3], m.Configs[4]
	r := &configsReport{
		Rows: m.Configs, Runs: configReps, Calls: configCalls, Turns: configTurns, InFlight: m.InFlight,
		Default: def, Tuned: tuned, File: file,
		Speedup: float64(def.BareHop) / float64(tuned.BareHop), FileRatio: float64(file.BareHop) / float64(tuned.BareHop),
		MaxRPCs: max(tp.RPCRate[0], tp.RPCRate[1], tp.RPCRate[2]),
	}
	if w := m.Waits; w != nil {
		r.Waits = w
		r.Stalled = 100 * float64(w.Stalls[0]+w.Stalls[1]) / float64(2*w.N)
	}
	return r
}

// recoveryReport is benchmark 7.
type recoveryReport struct {
	*Recovery
	P50, BareP50, Max, BareMax time.Duration
	RatioP50, RatioMax         float64
	// Goal bounds Tollgate's Max.
	Goal time.Duration
	Met  bool
	// CallModel's heartbeats, which the bare side copies.
	HeartbeatInterval, HeartbeatTimeout time.Duration
}

func newRecoveryReport(rec *Recovery) *recoveryReport {
	r := &recoveryReport{
		Recovery: rec,
		P50:      Median(rec.Tollgate), BareP50: Median(rec.Bare),
		Max: Percentile(rec.Tollgate, 100), BareMax: Percentile(rec.Bare, 100),
		Goal:              RecoveryGoal,
		HeartbeatInterval: activities.CallModelHeartbeatInterval, HeartbeatTimeout: activities.CallModelHeartbeatTimeout,
	}
	r.RatioP50, r.RatioMax = ratio(float64(r.P50), float64(r.BareP50)), ratio(float64(r.Max), float64(r.BareMax))
	r.Met = r.Max < RecoveryGoal
	return r
}

// gatewayReport is benchmark 8 (rows 8a, 8b): an approve over HTTP
// against the same approve as an Update, and the waiting list.
type gatewayReport struct {
	*Gateway
	Samples                            int
	HTTP50, HTTP99, Update50, Update99 time.Duration
	List50, List99, Bare50, Bare99     time.Duration
	// Queries50 is the p50 of one page's state queries without the
	// gateway; ListConcurrency how many of them run at once.
	Queries50                   time.Duration
	ListConcurrency             int
	Ratio50, Ratio99, ListRatio float64
	// The goals: HTTP within ResumeGoal× of the Update at p50, and a list
	// under ListGoal at p50.
	ResumeGoal         float64
	ListGoal           time.Duration
	MetResume, MetList bool
}

func newGatewayReport(g *Gateway) *gatewayReport {
	r := &gatewayReport{
		Gateway: g, Samples: len(g.HTTPSend),
		HTTP50: Percentile(g.HTTPSend, 50), HTTP99: Percentile(g.HTTPSend, 99),
		Update50: Percentile(g.UpdateSend, 50), Update99: Percentile(g.UpdateSend, 99),
		List50: Percentile(g.List, 50), List99: Percentile(g.List, 99),
		Bare50: Percentile(g.BareList, 50), Bare99: Percentile(g.BareList, 99),
		Queries50: Percentile(g.Queries, 50), ListConcurrency: gatewayListConcurrency,
		ResumeGoal: 1.3, ListGoal: 200 * time.Millisecond,
	}
	r.Ratio50, r.Ratio99 = ratio(float64(r.HTTP50), float64(r.Update50)), ratio(float64(r.HTTP99), float64(r.Update99))
	r.ListRatio = ratio(float64(r.List50), float64(r.Bare50))
	r.MetResume, r.MetList = r.Ratio50 <= r.ResumeGoal, r.List50 < r.ListGoal
	return r
}

// machine describes where the run happened.
func machine() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	load := ""
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) >= 3 {
			load = fmt.Sprintf("; load average at start %s %s %s", f[0], f[1], f[2])
		}
	}
	return fmt.Sprintf("%s, %d cores (GOMAXPROCS %d), %s %s/%s, %s%s",
		cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), load)
}

// The template's formatting funcs.

func verdict(ok bool) string {
	if ok {
		return "pass"
	}
	return "**miss**"
}

func x(r float64) string { return fmt.Sprintf("%.2f×", r) }

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// per is the mean of total over n, or a dash for none.
func per(total time.Duration, n int) string {
	if n == 0 {
		return "—"
	}
	return ms(total / time.Duration(n))
}

func ordinal(n int) string {
	switch n {
	case 1:
		return "1st"
	case 2:
		return "2nd"
	case 3:
		return "3rd"
	}
	return fmt.Sprintf("%dth", n)
}

// list formats each of xs and joins them with commas.
func list(format string, xs []float64) string {
	p := make([]string, len(xs))
	for i, v := range xs {
		p[i] = fmt.Sprintf(format, v)
	}
	return strings.Join(p, ", ")
}

// bytesOf is bytesStr for any of the byte counts the report holds.
func bytesOf(n any) (string, error) {
	switch v := n.(type) {
	case float64:
		return bytesStr(v), nil
	case int:
		return bytesStr(float64(v)), nil
	case int64:
		return bytesStr(float64(v)), nil
	case uint64:
		return bytesStr(float64(v)), nil
	}
	return "", fmt.Errorf("bytes: %T is not a byte count", n)
}

// manyCallsReport is benchmark 10.
type manyCallsReport struct {
	*ManyCalls
	Largest                       RunSize
	MaxEvents                     int
	PerCall, ShortPerCall, BarePC time.Duration
	Ratio, BareRatio              float64
	// MemFirst is the worker's memory at the first sample after the
	// first continue-as-new; PeakHeap and PeakAnon the most from then
	// on, over MemSamples samples; HeapGrowth and AnonGrowth their ratios.
	MemOK                  bool
	MemFirst               Mem
	PeakHeap, PeakAnon     uint64
	MemSamples             int
	HeapGrowth, AnonGrowth float64
	MetAnswered, MetSize   bool
	MetTime, MetMem        bool
}

// The goals of benchmark 10: the largest run's history, the time a call
// against a short turn's, and the worker's memory after the first
// continue-as-new, its peak over the first sample's.
const (
	ManyCallsEventsGoal = 10_000
	ManyCallsBytesGoal  = 10 << 20
	ManyCallsTimeGoal   = 1.1
	ManyCallsMemGoal    = 1.25
)

func newManyCallsReport(m *ManyCalls) *manyCallsReport {
	r := &manyCallsReport{ManyCalls: m, Largest: m.Largest(), MaxEvents: m.MaxEvents(),
		PerCall: m.PerCall(), ShortPerCall: m.ShortPerCall(), BarePC: m.BarePerCall()}
	r.Ratio = ratio(float64(r.PerCall), float64(r.ShortPerCall))
	r.BareRatio = ratio(float64(r.PerCall), float64(r.BarePC))
	r.MemFirst, r.PeakHeap, r.PeakAnon, r.MemSamples, r.MemOK = m.MemAfter()
	if r.MemOK {
		r.HeapGrowth = ratio(float64(r.PeakHeap), float64(r.MemFirst.HeapLive))
		r.AnonGrowth = ratio(float64(r.PeakAnon), float64(r.MemFirst.RSSAnon))
	}
	r.MetAnswered = m.Answered == m.Calls && m.ToolCalls == m.Calls
	r.MetSize = r.MaxEvents <= ManyCallsEventsGoal && r.Largest.Bytes <= ManyCallsBytesGoal
	r.MetTime = r.Ratio <= ManyCallsTimeGoal
	r.MetMem = r.MemOK && r.HeapGrowth <= ManyCallsMemGoal && r.AnonGrowth <= ManyCallsMemGoal
	return r
}

// Met reports whether every goal of benchmark 10 was met.
func (r *manyCallsReport) Met() bool { return r.MetAnswered && r.MetSize && r.MetTime && r.MetMem }
