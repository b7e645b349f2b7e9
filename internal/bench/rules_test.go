package bench

import (
	"fmt"
	"testing"

	"github.com/tollgate-dev/tollgate/policy"
)

// Row 1b with a 100-rule approval policy: the same turns on a worker
// whose rules decide every call (99 that do not match, then an allow),
// against the same worker without rules, both on one server beside one
// bare loop, run in turn so that drift on a shared machine falls on all
// three. Gated: set TOLLGATE_BENCH_RULES=1 (and TOLLGATE_BENCH_RULES_REPS).
//
//	TOLLGATE_BENCH_RULES=1 go test -run TestRulesRow1b -v ./internal/bench/
func TestRulesRow1b(t *testing.T) {
	reps := gated(t, "TOLLGATE_BENCH_RULES", "row 1b with 100 approval rules", "TOLLGATE_BENCH_RULES_REPS", DefaultConfig().CallReps)
	row := pairedRow1b(t, reps, Variant{Queue: TollgateQueue + "-rules", Rules: hundredRules()})
	for k := range row.turns {
		turn, bare := row.perCall(k)
		t.Logf("rules %v: per call %s (bare loop %s), ratio to the bare loop %s", k == 1, turn, bare, medianOf(row.ratios(k)))
	}
	t.Logf("with 100 rules against without, repetition by repetition: %s (goal %.2f)", medianOf(row.against(1, 0)), LoopCallGoal)
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
