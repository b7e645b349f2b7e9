package triage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/agents"
	"github.com/tollgate-dev/tollgate/examples/triage"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/workflows"
)

// team is agents.yaml with each agent's model a tollgatetest script.
func team(t *testing.T) []workflows.Agent {
	t.Helper()
	a, err := agents.Load("agents.yaml")
	require.NoError(t, err)
	for i := range a {
		a[i].Model = "tollgatetest:" + a[i].Name
	}
	return a
}

// Triage hands the refund to billing; billing asks the researcher (a
// child turn) for the order, then refunds it once a person approves the
// refund, which waits inside billing's turn.
func TestTriageHandsOffAndBillingRefundsAfterApproval(t *testing.T) {
	shop := triage.NewShop()
	opts := tollgate.Options{Tools: triage.Tools(shop), NoBuiltins: true, Agents: team(t)}
	models := tollgatetest.Models{
		"triage": tollgatetest.NewModel(
			tollgatetest.Reply("Billing will take it.", tollgatetest.Call("h1", "transfer_to_billing", map[string]any{"message": "refund of order 7"})),
		),
	}
	first := tollgatetest.NewAgentTurn(t, opts, models)
	res, err := first.Run(workflows.Input{Agent: "triage", Prompt: "My kettle from order 7 broke; refund it please."})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusTransferred, res.Status)
	require.Equal(t, "billing", res.Transfer.Target)

	models = tollgatetest.Models{
		"billing": tollgatetest.NewModel(
			tollgatetest.Reply("", tollgatetest.Call("r1", "agent_researcher", map[string]string{"task": "What was paid for order 7?"})),
			tollgatetest.Reply("", tollgatetest.Call("p1", "issue_refund", map[string]any{"order_id": "7", "amount_cents": 4999})),
			tollgatetest.Reply("Refunded 49.99 for your kettle."),
		),
		"researcher": tollgatetest.NewModel(
			tollgatetest.Reply("", tollgatetest.Call("l1", "lookup_order", map[string]string{"order_id": "7"})),
			tollgatetest.Reply("Order 7: one kettle, paid 4999 cents."),
		),
	}
	second := tollgatetest.NewAgentTurn(t, opts, models)
	var parked workflows.State
	second.StateAt(time.Hour, func(s workflows.State) { parked = s })
	second.RespondAt(2*time.Hour, workflows.Response{CallID: "p1", Decision: results.DecisionApprove, By: "ann"})
	res, err = second.Run(workflows.Input{Agent: "billing", Prompt: "refund of order 7"})
	require.NoError(t, err)

	require.Equal(t, workflows.StatusWaiting, parked.Status)
	require.Equal(t, results.StatePendingApproval, parked.Cards[1].State, "the refund waits for a person")
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Refunded 49.99 for your kettle.", res.Text)
	researched := res.Cards[0]
	require.Equal(t, "Order 7: one kettle, paid 4999 cents.", researched.Output.Parts[0].Text)
	require.Equal(t, []string{"billing", "researcher"}, researched.Agent.Chain)
	require.Equal(t, []string{"7:4999"}, shop.Refunds)
	// The researcher's model calls count in billing's usage: five in all.
	require.Len(t, models["researcher"].Requests(), 2)
}

// The agents file is checked: a tool of an agent that names no agent is
// refused with a sentence naming the agent and the field.
func TestTheAgentsFileIsChecked(t *testing.T) {
	_, err := agents.Parse([]byte(`agents: [{name: billing, model: "x:y", tools: ["agent:nobody"]}]`))
	require.EqualError(t, err, `agents file: agent "billing": tools[0] "agent:nobody" names no agent`)
}
