package refunds

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// DemoShop is an in-memory Shop with a few orders, so the example worker
// and the tests run without a real shop. It accepts any non-empty token
// except "revoked".
type DemoShop struct {
	mu      sync.Mutex
	orders  map[string]*Order
	refunds []Refund
}

var _ Shop = (*DemoShop)(nil)

// NewDemoShop returns a DemoShop holding orders 1001 and 1002.
func NewDemoShop() *DemoShop {
	orders := map[string]*Order{}
	for _, o := range []Order{
		{ID: "1001", Customer: "Grace Hopper", Items: []string{"kettle"}, TotalCents: 4999, Currency: "EUR", Status: "delivered"},
		{ID: "1002", Customer: "Alan Turing", Items: []string{"teapot", "2 mugs"}, TotalCents: 3450, Currency: "EUR", Status: "shipped"},
	} {
		o.URL = "https://shop.example.com/admin/orders/" + o.ID
		orders[o.ID] = &o
	}
	return &DemoShop{orders: orders}
}

// Order implements Shop.
func (s *DemoShop) Order(_ context.Context, token, id string) (Order, error) {
	if token == "" || token == "revoked" {
		return Order{}, ErrUnauthorized
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return Order{}, ErrNoOrder
	}
	c := *o
	c.Items = slices.Clone(o.Items)
	return c, nil
}

// Refund implements Shop.
func (s *DemoShop) Refund(_ context.Context, orderID string, amountCents int64, reason string) (Refund, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderID]
	if !ok {
		return Refund{}, ErrNoOrder
	}
	if left := o.TotalCents - o.RefundedCents; amountCents > left {
		return Refund{}, fmt.Errorf("%w: %s asked, %s left", ErrExceedsPaid, money(amountCents, o.Currency), money(left, o.Currency))
	}
	o.RefundedCents += amountCents
	r := Refund{
		ID:          fmt.Sprintf("re_%d", len(s.refunds)+1),
		OrderID:     orderID,
		AmountCents: amountCents,
		Currency:    o.Currency,
		Reason:      reason,
		OrderURL:    o.URL,
	}
	s.refunds = append(s.refunds, r)
	return r, nil
}

// Refunds are the refunds issued so far, oldest first.
func (s *DemoShop) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.refunds)
}
