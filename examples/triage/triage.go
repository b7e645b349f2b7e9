// Package triage is a customer-support team of three agents built on
// Tollgate's public API: triage hands a refund request to billing, billing
// asks researcher (called as a tool, in its own child turn) for the
// order's facts, and the refund billing then issues waits for a person's
// approval. The agents are defined in agents.yaml; the tools are here.
package triage

import (
	"context"
	"fmt"
	"sync"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// TaskQueue is where the team's worker serves turns.
const TaskQueue = "triage"

// Order is what the shop knows about one order; amounts are in cents.
type Order struct {
	ID         string `json:"id"`
	Item       string `json:"item"`
	TotalCents int64  `json:"total_cents"`
}

// Shop is an in-memory shop: its orders and the refunds it issued.
type Shop struct {
	mu      sync.Mutex
	orders  map[string]Order
	Refunds []string
}

// NewShop is a shop with one order, 7: a kettle.
func NewShop() *Shop {
	return &Shop{orders: map[string]Order{"7": {ID: "7", Item: "kettle", TotalCents: 4999}}}
}

type lookupArgs struct {
	OrderID string `json:"order_id"`
}

type refundArgs struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

// Tools are the team's tools: lookup_order (the researcher's) and
// issue_refund (billing's; not idempotent, so it runs at most once per
// approved call).
func Tools(shop *Shop) []tool.Tool {
	lookup := tool.MustFunc(tool.Spec{Name: "lookup_order", Description: "Look an order up by id.", Idempotent: true, Concurrent: true},
		func(_ context.Context, _ tool.Call, a lookupArgs) (results.Outcome, error) {
			shop.mu.Lock()
			o, ok := shop.orders[a.OrderID]
			shop.mu.Unlock()
			if !ok {
				return results.FailTool("there is no order %q", a.OrderID), nil
			}
			return results.SucceedText(fmt.Sprintf("order %s: one %s, paid %d cents", o.ID, o.Item, o.TotalCents)), nil
		})
	refund := tool.MustFunc(tool.Spec{Name: "issue_refund", Description: "Refund an order, in cents.", Approval: tool.ApprovalAlways},
		func(_ context.Context, _ tool.Call, a refundArgs) (results.Outcome, error) {
			shop.mu.Lock()
			defer shop.mu.Unlock()
			o, ok := shop.orders[a.OrderID]
			if !ok || a.AmountCents <= 0 || a.AmountCents > o.TotalCents {
				return results.FailTool("refund between 1 cent and what the order cost"), nil
			}
			shop.Refunds = append(shop.Refunds, fmt.Sprintf("%s:%d", a.OrderID, a.AmountCents))
			return results.SucceedText(fmt.Sprintf("refunded %d cents on order %s", a.AmountCents, a.OrderID)), nil
		})
	return []tool.Tool{lookup, refund}
}
