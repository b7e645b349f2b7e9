package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/policy"
)

// Row 1b with a 100-rule approval policy: the same turns on a worker
// whose rules decide every call (99 that do not match, then an allow),
// against the same worker without rules, each on a server of its own,
// alternating so that drift on a shared machine falls on both sides.
// Gated: set TOLLGATE_BENCH_RULES=1 (and TOLLGATE_BENCH_RULES_ROUNDS).
//
//	TOLLGATE_BENCH_RULES=1 go test -run TestRulesRow1b -v ./internal/bench/
func TestRulesRow1b(t *testing.T) {
	rounds := gated(t, "TOLLGATE_BENCH_RULES", "row 1b with 100 approval rules", "TOLLGATE_BENCH_RULES_ROUNDS", 3)
	var off, on []time.Duration
	var ratios []float64
	for round := range rounds {
		var perCall [2]time.Duration
		for i, rules := range [][]policy.Rule{nil, hundredRules()} {
			r := runRow1b(t, Options{Rules: rules}, DefaultConfig().CallReps)
			perCall[i] = r.PerCall
			t.Logf("round %d, rules %v: per call %s, ratio to the bare loop %.3f", round, rules != nil, r.PerCall, r.RatioLoop)
		}
		off, on = append(off, perCall[0]), append(on, perCall[1])
		ratios = append(ratios, ratio(float64(perCall[1]), float64(perCall[0])))
	}
	t.Logf("per call without rules %s, with 100 rules %s; ratios per round %.3f; median %.3f (goal %.2f)",
		Median(off), Median(on), ratios, MedianFloat(ratios), LoopCallGoal)
}

// hundredRules decide the benchmark's no-op tool: 99 require_approval
// rules over the turn that match no benchmark turn, each evaluated, then
// an allow that matches, so every call still runs unasked.
func hundredRules() []policy.Rule {
	rules := make([]policy.Rule, 0, 100)
	for i := range 99 {
		rules = append(rules, policy.Rule{
			Name: fmt.Sprintf("r%d", i), Tools: []string{NoopTool}, Action: policy.ActionRequireApproval,
			When: fmt.Sprintf(`turn.user == "nobody-%d" && step > %d || turn.agent == "agent-%d"`, i, i, i),
		})
	}
	return append(rules, policy.Rule{Name: "noop", Tools: []string{NoopTool}, When: `step >= 0`, Action: policy.ActionAllow})
}
