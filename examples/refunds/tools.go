package refunds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// shopHint is what the card waiting for a connection tells the person.
const shopHint = "Connect your shop account: create a token with the orders:read scope under Settings > API tokens in the shop's back office."

type lookupArgs struct {
	OrderID string `json:"order_id" jsonschema:"the order number, for example 1001"`
}

func lookupOrder(shop Shop, conns connections.Store) tool.Tool {
	return tool.MustFunc(tool.Spec{
		Name:        "lookup_order",
		Description: "Look up an order: customer, items, total, what was already refunded and its status. Uses the support person's shop account; if they have not connected it yet, they are asked to.",
		// Reading changes nothing, so a retry after a network blip is safe
		// and several lookups of one step may run side by side.
		Idempotent: true,
		Concurrent: true,
	}, func(ctx context.Context, call tool.Call, args lookupArgs) (results.Outcome, error) {
		if args.OrderID == "" {
			return results.FailTool("order_id is empty"), nil
		}
		// The tool runs again with the person's answer to the connection
		// request. Anything but "connected" (declined, cancelled) means
		// asking again would only loop.
		if r := call.Resume; r != nil && r.Decision != results.DecisionConnected {
			return results.FailTool("the user did not connect their shop account (%s); tell them orders cannot be looked up without it", r.Decision), nil
		}
		if call.User == "" {
			// An internal error, not a tool error: the model cannot fix a
			// turn that was started without a user.
			return results.Outcome{}, errors.New("lookup_order: the turn has no user to look up a shop connection for")
		}
		cred, err := conns.Get(ctx, call.User, ShopProvider)
		if errors.Is(err, connections.ErrNotConnected) {
			// Also after a "connected" answer with nothing stored yet:
			// asking again lets the person finish connecting.
			return results.NeedConnection(ShopProvider, shopHint, "orders:read"), nil
		}
		if err != nil {
			return results.Outcome{}, fmt.Errorf("lookup_order: read the shop connection: %w", err)
		}
		o, err := shop.Order(ctx, cred.Token, args.OrderID)
		switch {
		case errors.Is(err, ErrUnauthorized):
			// A revoked or expired token: the person can fix it by
			// connecting again, so wait for that rather than fail.
			return results.NeedConnection(ShopProvider, "The shop no longer accepts your token. "+shopHint, "orders:read"), nil
		case errors.Is(err, ErrNoOrder):
			return results.FailTool("there is no order %q; ask the customer for the number on their receipt", args.OrderID), nil
		case err != nil:
			return results.Outcome{}, tool.Retryable(fmt.Errorf("lookup_order: read order %s: %w", args.OrderID, err))
		}
		text := fmt.Sprintf("Order %s for %s: %s. Total %s, already refunded %s, status %s.",
			o.ID, o.Customer, strings.Join(o.Items, ", "), money(o.TotalCents, o.Currency), money(o.RefundedCents, o.Currency), o.Status)
		return results.SucceedText(text).WithSources(results.Source{URL: o.URL, Title: "Order " + o.ID}), nil
	})
}

type refundArgs struct {
	OrderID     string `json:"order_id" jsonschema:"the order to refund"`
	AmountCents int64  `json:"amount_cents" jsonschema:"how much to refund, in cents of the order's currency"`
	Reason      string `json:"reason" jsonschema:"why, in a sentence the customer would recognise; kept with the refund"`
}

// RefundDetails is what an issued refund puts in its card's
// output.details: for the UI and the audit log, never shown to the model.
type RefundDetails struct {
	RefundID    string `json:"refund_id"`
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

func issueRefund(shop Shop) tool.Tool {
	return tool.MustFunc(tool.Spec{
		Name:        "issue_refund",
		Description: "Refund part or all of an order to the customer's original payment method. Look the order up first. A person approves every refund before it is issued.",
		// Money leaves the business, so a person approves every call. It
		// is the worker's floor: a turn's policy cannot lower it.
		Approval: tool.ApprovalAlways,
		// The payments API takes no idempotency key: a retry after a lost
		// response would refund twice. So Tollgate runs it at most once
		// per approved call, and if the worker dies mid-call the card says
		// outcome_unknown instead of guessing.
		Idempotent: false,
		// Not concurrent: two refunds of one order in one step must each
		// see what the other left to refund.
		Concurrent: false,
	}, func(ctx context.Context, call tool.Call, args refundArgs) (results.Outcome, error) {
		switch {
		case args.OrderID == "":
			return results.FailTool("order_id is empty"), nil
		case args.AmountCents <= 0:
			return results.FailTool("amount_cents must be positive, got %d", args.AmountCents), nil
		case strings.TrimSpace(args.Reason) == "":
			return results.FailTool("give a reason; it is kept with the refund"), nil
		}
		r, err := shop.Refund(ctx, args.OrderID, args.AmountCents, args.Reason)
		switch {
		case errors.Is(err, ErrNoOrder):
			return results.FailTool("there is no order %q; nothing was refunded", args.OrderID), nil
		case errors.Is(err, ErrExceedsPaid):
			return results.FailTool("nothing was refunded: %v; look the order up for what is left to refund", err), nil
		case err != nil:
			// Not Retryable: the refund may have gone through. An
			// internal error keeps the detail with operators, who check
			// the order before anyone tries again.
			return results.Outcome{}, fmt.Errorf("issue_refund: order %s: %w", args.OrderID, err)
		}
		details, err := json.Marshal(RefundDetails{RefundID: r.ID, OrderID: r.OrderID, AmountCents: r.AmountCents, Currency: r.Currency})
		if err != nil {
			return results.Outcome{}, fmt.Errorf("issue_refund: encode details: %w", err)
		}
		text := fmt.Sprintf("Refunded %s on order %s (refund %s).", money(r.AmountCents, r.Currency), r.OrderID, r.ID)
		return results.SucceedText(text).
			WithSources(results.Source{URL: r.OrderURL, Title: "Order " + r.OrderID}).
			WithDetails(details), nil
	})
}
