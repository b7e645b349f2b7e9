package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// row1bSide is one worker configuration of a paired row-1b run: its
// server, and the turns and bare loops measured on it.
type row1bSide struct {
	env         *Env
	model       string
	turns, bare []time.Duration
}

// perCall is the side's median turn and bare loop per tool call.
func (s *row1bSide) perCall() (turn, bare time.Duration) {
	n := time.Duration(DefaultConfig().Calls)
	return Median(s.turns) / n, Median(s.bare) / n
}

// ratios are the side's per-repetition ratios to its bare loop.
func (s *row1bSide) ratios() []float64 { return repRatios(s.turns, s.bare) }

// pairedRow1b runs benchmark 1's turns with activity tools, and the bare
// loop of the same activities, on a server for each configuration in
// opts, all the servers at once, a repetition of each side in turn with
// the order rotating. Run one after the other, two configurations
// differed by as much as the machine's speed drifted between them, which
// on a shared machine was more than what told them apart.
func pairedRow1b(t *testing.T, opts []Options, reps int) []*row1bSide {
	t.Helper()
	n := DefaultConfig().Calls
	sides := make([]*row1bSide, len(opts))
	for k, o := range opts {
		o.DynamicConfig = TunedDynamicConfig()
		e, err := Start(o)
		require.NoError(t, err)
		t.Cleanup(e.Close)
		model, err := e.Script(n, 1, NoopTool, struct{}{})
		require.NoError(t, err)
		sides[k] = &row1bSide{env: e, model: model}
	}
	ctx := t.Context()
	// One unmeasured round warms every side.
	for i := -1; i < reps; i++ {
		for j := range sides {
			s := sides[(i+1+j)%len(sides)]
			runs := []func() error{
				func() error {
					_, err := s.env.RunTurn(ctx, id("paired-turn"), TurnInput(s.model, n, false))
					return err
				},
				func() error { return s.env.RunBare(ctx, id("paired-loop"), BareLoopName, n) },
			}
			var got [2]time.Duration
			for r := range runs {
				// The turn and its bare loop take turns going first.
				at := (i + 1 + r) % len(runs)
				d, err := timed(runs[at])
				require.NoError(t, err)
				got[at] = d
			}
			if i >= 0 {
				s.turns, s.bare = append(s.turns, got[0]), append(s.bare, got[1])
			}
		}
	}
	return sides
}
