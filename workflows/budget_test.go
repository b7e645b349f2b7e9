package workflows

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

// oneEchoPerStep is n replies of one echo call each, then "done".
func oneEchoPerStep(n int) []results.Message {
	out := make([]results.Message, 0, n+1)
	for i := 1; i <= n; i++ {
		out = append(out, calls("", tc(fmt.Sprintf("e%d", i), "echo", fmt.Sprintf(`{"text":"%d"}`, i))))
	}
	return append(out, results.AssistantText("done"))
}

func TestBudgetStopEndsTheTurnBudgetExhausted(t *testing.T) {
	h := newHarness(t, oneEchoPerStep(5)...)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}, Policy: Policy{Budget: Budget{ToolCalls: 3}, OnBudget: OnBudgetStop}})

	require.Equal(t, StatusBudgetExhausted, res.Status)
	require.Len(t, h.log.all(), 3)
	require.Contains(t, res.Error, "the turn reached its budget: 3 of 3 tool calls")
	spent := Spent{Tokens: res.Usage.InputTokens + res.Usage.OutputTokens, Cost: res.Cost, ModelCalls: 3, ToolCalls: 3}
	require.NotZero(t, spent.Tokens)
	require.Equal(t, &BudgetState{Limit: Budget{ToolCalls: 3}, Spent: spent}, res.Budget)
}

// A budget reached parks the turn on a wait people answer like an
// approval: approve with a new budget goes on; deny stops the turn.
func TestBudgetAsksAPersonForMore(t *testing.T) {
	h := newHarness(t, oneEchoPerStep(6)...)
	var tooLow, raised, stopped updateOutcome
	h.env.RegisterDelayedCallback(func() {
		s := h.state(t)
		require.Equal(t, StatusWaiting, s.Status)
		c := s.Cards[len(s.Cards)-1]
		require.Equal(t, "budget_1", c.CallID)
		require.Equal(t, BudgetTool, c.Tool)
		require.Equal(t, results.StatePendingApproval, c.State)
		require.Contains(t, c.Interrupt.Prompt, "the turn reached its budget: 3 of 3 tool calls")
		require.JSONEq(t, `{"tool_calls":3}`, string(c.Arguments))
		h.update(Response{CallID: "budget_1", Decision: results.DecisionApprove, Arguments: []byte(`{"tool_calls":2}`)}, &tooLow)
		h.update(Response{CallID: "budget_1", Decision: results.DecisionApprove, Arguments: []byte(`{"tool_calls":5}`), By: "lead"}, &raised)
	}, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "budget_2", Decision: results.DecisionDeny, Reason: "enough", By: "lead"}, &stopped)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}, Policy: Policy{Budget: Budget{ToolCalls: 3}}})

	require.ErrorContains(t, tooLow.rejected, "the new budget is used up already (3 of 2 tool calls)")
	require.NoError(t, raised.err)
	require.True(t, stopped.completed)
	require.Equal(t, StatusBudgetExhausted, res.Status)
	require.Len(t, h.log.all(), 5)
	require.Contains(t, res.Error, "5 of 5 tool calls; enough")
	first := mustCard(t, res.Cards, "budget_1")
	require.Equal(t, results.StateSucceeded, first.State)
	require.Equal(t, "lead", first.Decisions[0].By)
	require.Equal(t, results.StateRefused, mustCard(t, res.Cards, "budget_2").State)
	require.Equal(t, Budget{ToolCalls: 5}, res.Budget.Limit)
	// The model never sees a budget wait.
	for _, m := range h.model.last() {
		require.NotContains(t, m.ToolCallID, "budget")
	}
}

// Approve without arguments grants the same budget again from what was
// used.
func TestBudgetApprovedAsIsGrantsTheSameAgain(t *testing.T) {
	h := newHarness(t, oneEchoPerStep(3)...)
	h.respond(time.Minute, Response{CallID: "budget_1", Decision: results.DecisionApprove}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}, Policy: Policy{Budget: Budget{ModelCalls: 2}}})

	require.Equal(t, StatusCompleted, res.Status, res.Error)
	require.Len(t, h.log.all(), 3)
	require.Equal(t, Budget{ModelCalls: 4}, res.Budget.Limit)
}

// Cost counts priced calls; a cost budget stops at it, and a model
// without a price asks rather than counting zero.
func TestBudgetCost(t *testing.T) {
	h := newHarness(t, oneEchoPerStep(5)...)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}, Policy: Policy{Budget: Budget{Cost: 0.05}, OnBudget: OnBudgetStop}})
	require.Equal(t, StatusBudgetExhausted, res.Status)
	require.Positive(t, res.Cost)
	require.Zero(t, res.UnpricedCalls)
	require.Regexp(t, `the turn reached its budget: \$0\.0[0-9]+ of \$0\.0500`, res.Error)
	require.Less(t, res.Steps, 5)

	h = newHarness(t, oneEchoPerStep(2)...)
	h.respond(time.Minute, Response{CallID: "budget_1", Decision: results.DecisionApprove}, nil)
	res = h.run(t, Input{Prompt: "p", Model: "fake:unpriced", Tools: []string{"echo"}, Policy: Policy{Budget: Budget{Cost: 1}}})
	require.Equal(t, StatusCompleted, res.Status, res.Error)
	require.Zero(t, res.Cost)
	require.Equal(t, 3, res.UnpricedCalls)
	c := mustCard(t, res.Cards, "budget_1")
	require.Contains(t, results.Message{Parts: c.Output.Parts}.Text(), "the cost of 1 model calls is unknown")
	// Once let go on, unpriced calls do not ask again.
	require.Equal(t, results.StateSucceeded, c.State)
	_, asked := card(res.Cards, "budget_2")
	require.False(t, asked)
}

func TestBudgetInputIsChecked(t *testing.T) {
	require.ErrorContains(t, validateInput(Input{Prompt: "p", Model: "m", Policy: Policy{Budget: Budget{Tokens: -1}}}), "policy.budget limits must not be negative")
	require.ErrorContains(t, validateInput(Input{Prompt: "p", Model: "m", Policy: Policy{OnBudget: "pray"}}), `policy.on_budget is "pray"; it must be ask or stop`)
}
