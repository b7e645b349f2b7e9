package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSessionsSmoke runs benchmark 9 at a tiny size: a session that
// continues as new twice, a few sends a side, and idle sessions past a
// small sticky cache.
func TestSessionsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded server and a subprocess worker")
	}
	e, err := Start(Options{DynamicConfig: TunedDynamicConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := e.Sessions(ctx, SessionConfig{Turns: 6, PerRun: 2, Samples: 3, Idle: 12, Cache: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Runs) != 4 || s.Runs[0].Turns != 2 || s.Runs[3].Turns != 0 {
		t.Errorf("runs %+v: want three runs of two turns and the end's", s.Runs)
	}
	if len(s.Send) != 3 || len(s.BareSend) != 3 {
		t.Errorf("send samples %v, bare %v: want 3 a side", s.Send, s.BareSend)
	}
	for i, p := range s.Idle {
		if p == nil || len(p.Counts) != 4 || p.Counts[3] != 12 {
			t.Errorf("idle side %d: %+v", i, p)
		}
	}
	r := newSessionReport(s)
	t.Logf("per turn: session %.1f → %.1f events, %.0f → %.0f bytes; turn %.1f → %.1f events; send p50 %s vs %s",
		r.FirstEvents, r.LastEvents, r.FirstBytes, r.LastBytes, s.First.Events, s.Last.Events, r.Send50, r.BareSend50)
	if r.Continues != 3 {
		t.Errorf("continues %d, want 3", r.Continues)
	}
}

// The report's rows 9a–9c and the section under 9, from canned numbers:
// flat history passes, a send ratio over the goal is a miss with its
// reason.
func TestSessionsReport(t *testing.T) {
	idle := func(side string, heap ...uint64) *Parked {
		p := &Parked{Side: side, Cache: 250, Counts: []int{0, 250, 500, 1000}, Park: 20 * time.Second}
		for _, h := range heap {
			p.Points = append(p.Points, Mem{HeapLive: h, RSSAnon: 2 * h})
		}
		p.After = p.Points[len(p.Points)-1]
		return p
	}
	s := &Sessions{
		Turns: 300, PerRun: 100,
		Runs:  []SessionRun{{100, 1300, 230_000}, {100, 1310, 232_000}, {100, 1305, 233_000}, {0, 11, 14_000}},
		First: TurnHistory{Events: 14, Bytes: 4000}, Last: TurnHistory{Events: 14, Bytes: 4100},
		Send: msDs(30, 31, 32, 60), BareSend: msDs(20, 21, 22, 40),
		Idle: [2]*Parked{idle(sideTollgate, 10e6, 20e6, 20.1e6, 20.2e6), idle(sideBare, 10e6, 15e6, 15e6, 15.1e6)},
	}
	out, err := render(&measurements{Machine: "test", Sessions: s})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 9a | history per session turn, first 100 turns → last 100 of 300 (3 continues-as-new)",
		"| 13.0 → 13.1 ev,",
		"| pass |",
		"| 9b |",
		"| 31.0 ms (60.0 ms) | 21.0 ms (40.0 ms) | 1.48× | p50 ≤ 1.3× | **miss** |",
		"- 9b (1.48×; goal ≤ 1.3×)",
		"| 9c | worker growth per 1,000 idle sessions beyond the cache (250 → 1000",
		"**9. Sessions.**",
		"run 4: 0 turns, 11 events, 13.7 KiB",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "after drain") {
		t.Errorf("idle sessions are not drained:\n%s", out)
	}
	if strings.Contains(out, "- 9a (") || strings.Contains(out, "- 9c (") {
		t.Errorf("goals met are not listed as missed:\n%s", out)
	}
}
