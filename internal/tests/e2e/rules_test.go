package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

var draftsAllowed = policy.Rule{Name: "drafts", Tools: []string{"write_file"}, When: `args.path.startsWith("drafts/")`, Action: policy.ActionAllow}

// A rule lets write_file into drafts/ run without asking; the decision
// is recorded in history with the rule's name.
func TestRuleAllowsACall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "rules_allowed")
	e.rules = []policy.Rule{draftsAllowed}
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "drafts/idea.md", "content": "idea\n"})),
		expecting(reply("Drafted."), 1, "created drafts/idea.md"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Draft it", Model: model, Tools: []string{"write_file"}})
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	c := mustCard(t, res.Cards, "w1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Empty(t, c.Decisions, "nobody was asked")
	require.Equal(t, &results.Approval{Rule: "drafts", Action: results.ApprovalAllow}, c.Approval)
	b, err := os.ReadFile(filepath.Join(e.ws, "drafts", "idea.md"))
	require.NoError(t, err)
	require.Equal(t, "idea\n", string(b))
	e.record(run)
}

// Two members of leads approve a call a rule gave a quorum of two.
func TestRuleQuorumOfTwo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "rules_quorum")
	e.rules = []policy.Rule{{Name: "contracts", Tools: []string{"write_file"}, When: `args.path.startsWith("contracts/")`,
		Action: policy.ActionRequireApproval, Reason: "contracts need two leads", Group: "leads", Quorum: 2, SeparateDuties: true}}
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "contracts/acme.md", "content": "terms\n"})),
		expecting(reply("Written."), 1, "created contracts/acme.md"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write the contract", Model: model, Tools: []string{"write_file"}, User: "carl"})
	e.waitCard(run, "w1", results.StatePendingApproval)

	_, err := respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "carl", Groups: []string{"leads"}})
	require.ErrorContains(t, err, "carl started this turn and may not approve its calls")
	got, err := respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "ann", Groups: []string{"leads"}})
	require.NoError(t, err)
	require.Equal(t, results.StatePendingApproval, got.State)
	require.Equal(t, []string{"ann"}, got.Approval.Approvals)
	require.NoFileExists(t, filepath.Join(e.ws, "contracts", "acme.md"), "one approval of two runs nothing")
	_, err = respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "bob", Groups: []string{"leads"}})
	require.NoError(t, err)

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	c := mustCard(t, res.Cards, "w1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, []string{"ann", "bob"}, c.Approval.Approvals)
	e.record(run)
}

// Unanswered past escalate.after, the wait escalates and a member of the
// wider group approves.
func TestRuleEscalates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "rules_escalated")
	e.rules = []policy.Rule{{Name: "writes", Tools: []string{"write_file"}, Action: policy.ActionRequireApproval, Group: "leads",
		Escalate: &policy.Escalate{After: policy.Duration(time.Second), Group: "managers"}}}
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "plan.md", "content": "plan\n"})),
		expecting(reply("Written."), 1, "created plan.md"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write the plan", Model: model, Tools: []string{"write_file"}})
	e.waitState(run, "escalated", func(s workflows.State) bool {
		c, ok := card(s.Cards, "w1")
		return ok && c.Approval != nil && c.Approval.Escalated
	})
	got, err := respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "mona", Groups: []string{"managers"}})
	require.NoError(t, err)
	require.Contains(t, []results.State{results.StateRunning, results.StateSucceeded}, got.State)

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.True(t, mustCard(t, res.Cards, "w1").Approval.Escalated)
	e.record(run)
}

// Two writes wait under a rule; the workers restart with new rules and
// an operator re-evaluates the turn: the draft is released and runs, the
// .env write is refused with the new rule's reason. The history is the
// corpus's reevaluated.
func TestReevaluateAfterTheRulesChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "reevaluated")
	e.rules = []policy.Rule{{Name: "every_write", Tools: []string{"write_file"}, Action: policy.ActionRequireApproval, Group: "leads"}}
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "drafts/plan.md", "content": "plan\n"}),
			call("w2", "write_file", map[string]string{"path": "prod.env", "content": "KEY=1\n"})),
		expecting(reply("Drafted; the .env write was refused."), 2, "never write .env files"),
	)
	rw := e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write the plan and the settings", Model: model, Tools: []string{"write_file"}})
	e.waitState(run, "both writes waiting", func(s workflows.State) bool {
		w1, ok1 := card(s.Cards, "w1")
		w2, ok2 := card(s.Cards, "w2")
		return ok1 && ok2 && w1.State == results.StatePendingApproval && w2.State == results.StatePendingApproval
	})

	e.stopWorker(rw)
	e.rules = []policy.Rule{
		draftsAllowed,
		{Name: "no_env", Tools: []string{"write_file"}, When: `args.path.endsWith(".env")`, Action: policy.ActionDeny, Reason: "never write .env files; put settings in config.yaml"},
	}
	e.startWorker()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	got, err := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}.Reevaluate(ctx, run.GetID(), "olga")
	require.NoError(t, err)
	require.Len(t, got.Calls, 2)
	require.Equal(t, workflows.ReevaluatedReleased, got.Calls[0].Outcome)
	require.Equal(t, "drafts/allow", got.Calls[0].Now)
	require.Equal(t, workflows.ReevaluatedRefused, got.Calls[1].Outcome)
	require.Equal(t, "no_env/deny", got.Calls[1].Now)

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, results.StateSucceeded, mustCard(t, res.Cards, "w1").State)
	require.NotEqual(t, results.StateSucceeded, mustCard(t, res.Cards, "w2").State)
	require.NoFileExists(t, filepath.Join(e.ws, "prod.env"))
	e.record(run)
}
