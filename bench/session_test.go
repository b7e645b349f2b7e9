package bench

import (
	"context"
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
