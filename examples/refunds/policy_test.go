package refunds_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/examples/refunds"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/workflows"
)

// With examples/policy.yaml, a refund over 1000.00 waits for two members
// of leads other than the turn's user; nothing reaches the shop before
// the second approval.
func TestLargeRefundNeedsTwoLeads(t *testing.T) {
	rules, err := policy.Load("../policy.yaml")
	require.NoError(t, err)
	shop := refunds.NewDemoShop()
	conns := connections.NewMemoryStore()
	m := tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("r1", "issue_refund", map[string]any{"order_id": "1001", "amount_cents": 150000, "reason": "goodwill"})),
		tollgatetest.Reply("That is more than the order; I refunded nothing."),
	)
	turn := tollgatetest.NewTurn(t, tollgate.Options{Tools: refunds.Tools(shop, conns), NoBuiltins: true, Connections: conns, Rules: rules}, m)
	var afterOne workflows.State
	turn.RespondAt(time.Hour, workflows.Response{CallID: "r1", Decision: results.DecisionApprove, By: "lee", Groups: []string{"leads"}})
	turn.StateAt(2*time.Hour, func(s workflows.State) { afterOne = s })
	turn.RespondAt(3*time.Hour, workflows.Response{CallID: "r1", Decision: results.DecisionApprove, By: "kim", Groups: []string{"leads"}})

	res, err := turn.Run(refunds.NewInput("ann", "Refund 1500 EUR on order 1001."))
	require.NoError(t, err)

	a := card(t, afterOne.Cards, "r1").Approval
	require.Equal(t, "large_refund", a.Rule)
	require.Equal(t, []string{"lee"}, a.Approvals)
	require.Equal(t, 2, a.Quorum)
	require.Equal(t, results.StatePendingApproval, card(t, afterOne.Cards, "r1").State)
	c := card(t, res.Cards, "r1")
	require.Equal(t, []string{"lee", "kim"}, c.Approval.Approvals)
	require.Equal(t, results.StateFailed, c.State, "approved, the tool ran and the shop refused more than was paid")
	require.Contains(t, c.Failure.Message, "exceeds")
	require.Empty(t, shop.Refunds())
}
