package refunds_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/examples/refunds"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/workflows"
)

// newTurn runs the agent's tools, and no built-ins, against shop in the
// SDK's test environment, with m standing in for the model.
func newTurn(t *testing.T, shop refunds.Shop, conns connections.Store, m *tollgatetest.Model) *tollgatetest.Turn {
	return tollgatetest.NewTurn(t, tollgate.Options{
		Tools:       refunds.Tools(shop, conns),
		NoBuiltins:  true,
		Connections: conns,
	}, m)
}

var refundKettle = map[string]any{"order_id": "1001", "amount_cents": 4999, "reason": "arrived broken"}

func card(t *testing.T, cards []results.Card, id string) results.Card {
	t.Helper()
	for _, c := range cards {
		if c.CallID == id {
			return c
		}
	}
	require.FailNow(t, "no card", "no card for call %s in %v", id, cards)
	return results.Card{}
}

// toolText is the text of the tool message answering call id in a
// request: what the model was shown.
func toolText(t *testing.T, msgs []results.Message, id string) string {
	t.Helper()
	for _, m := range msgs {
		if m.Role == results.RoleTool && m.ToolCallID == id {
			return m.Text()
		}
	}
	require.FailNow(t, "no tool message", "the model was not shown the result of %s", id)
	return ""
}

// A refund waits for a person, runs once when approved, and its card
// carries the order link and the refund id for the UI.
func TestRefundRunsOnceAfterApproval(t *testing.T) {
	shop := refunds.NewDemoShop()
	m := tollgatetest.NewModel(
		tollgatetest.Reply("I'll refund the kettle.", tollgatetest.Call("r1", "issue_refund", refundKettle)),
		tollgatetest.Reply("Refunded 49.99 EUR; it reaches your card in 3 to 5 days."),
	)
	turn := newTurn(t, shop, connections.NewMemoryStore(), m)
	var parked workflows.State
	var refundsWhileParked int
	turn.StateAt(time.Hour, func(s workflows.State) {
		parked = s
		refundsWhileParked = len(shop.Refunds())
	})
	turn.RespondAt(2*time.Hour, workflows.Response{CallID: "r1", Decision: results.DecisionApprove, By: "ann"})

	res, err := turn.Run(refunds.NewInput("ann", "Order 1001 arrived broken; please refund it."))
	require.NoError(t, err)

	require.Equal(t, workflows.StatusWaiting, parked.Status)
	require.Equal(t, results.StatePendingApproval, card(t, parked.Cards, "r1").State)
	require.Zero(t, refundsWhileParked, "no money moves before a person approves")

	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Len(t, shop.Refunds(), 1, "the tool ran exactly once")
	refund := shop.Refunds()[0]
	require.Equal(t, int64(4999), refund.AmountCents)

	c := card(t, res.Cards, "r1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, "ann", c.Decisions[0].By)
	require.Equal(t, []results.Source{{URL: "https://shop.example.com/admin/orders/1001", Title: "Order 1001"}}, c.Output.Sources)
	var details refunds.RefundDetails
	require.NoError(t, json.Unmarshal(c.Output.Details, &details))
	require.Equal(t, refunds.RefundDetails{RefundID: refund.ID, OrderID: "1001", AmountCents: 4999, Currency: "EUR"}, details)

	reqs := m.Requests()
	require.Len(t, reqs, 2)
	seen := toolText(t, reqs[1].Messages, "r1")
	require.Contains(t, seen, "Refunded 49.99 EUR on order 1001 (refund re_1).")
	require.Contains(t, seen, "https://shop.example.com/admin/orders/1001", "the model may cite the order")
	require.NotContains(t, seen, "refund_id", "details are for people, not the model")
}

// A denied refund never reaches the shop, and the model is told why.
func TestDeniedRefundNeverRuns(t *testing.T) {
	shop := refunds.NewDemoShop()
	m := tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("r1", "issue_refund", refundKettle)),
		tollgatetest.Reply("I could not refund it; a colleague will follow up."),
	)
	turn := newTurn(t, shop, connections.NewMemoryStore(), m)
	turn.RespondAt(time.Hour, workflows.Response{CallID: "r1", Decision: results.DecisionDeny, Reason: "the kettle was a gift card purchase", By: "ann"})

	res, err := turn.Run(refunds.NewInput("ann", "Refund order 1001."))
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Empty(t, shop.Refunds())
	require.Equal(t, results.StateRefused, card(t, res.Cards, "r1").State)
	require.Contains(t, toolText(t, m.Requests()[1].Messages, "r1"), "the kettle was a gift card purchase")
}

// Looking an order up waits for the person's shop connection; once they
// have stored a token and answered "connected", the tool runs again with
// it and the model sees the order.
func TestLookupOrderWaitsForTheShopConnection(t *testing.T) {
	conns := connections.NewMemoryStore()
	m := tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("l1", "lookup_order", map[string]string{"order_id": "1002"})),
		tollgatetest.Reply("Your teapot and mugs have shipped."),
	)
	turn := newTurn(t, refunds.NewDemoShop(), conns, m)
	var parked workflows.State
	turn.StateAt(time.Hour, func(s workflows.State) { parked = s })
	// What the person's connect flow does: store their token for the
	// shop, then tell the turn.
	turn.Env.RegisterDelayedCallback(func() {
		require.NoError(t, conns.Put(context.Background(), connections.Credential{Provider: refunds.ShopProvider, User: "ann", Token: "shp_ann"}))
	}, 90*time.Minute)
	turn.RespondAt(2*time.Hour, workflows.Response{CallID: "l1", Decision: results.DecisionConnected, By: "ann"})

	res, err := turn.Run(refunds.NewInput("ann", "Where is order 1002?"))
	require.NoError(t, err)

	require.Equal(t, workflows.StatusWaiting, parked.Status)
	waiting := card(t, parked.Cards, "l1")
	require.Equal(t, results.StateWaitingConnection, waiting.State)
	require.Equal(t, refunds.ShopProvider, waiting.Connection.Provider)
	require.Equal(t, []string{"orders:read"}, waiting.Connection.Scopes)

	require.Equal(t, workflows.StatusCompleted, res.Status)
	c := card(t, res.Cards, "l1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, results.DecisionConnected, c.Decisions[0].Decision)
	require.Equal(t, "https://shop.example.com/admin/orders/1002", c.Output.Sources[0].URL)
	require.Contains(t, toolText(t, m.Requests()[1].Messages, "l1"), "Order 1002 for Alan Turing: teapot, 2 mugs. Total 34.50 EUR")
}
