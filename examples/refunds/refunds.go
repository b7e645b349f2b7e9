// Package refunds is a customer-support agent built on Tollgate: the
// model looks orders up and refunds them, and a person approves every
// refund before any money moves.
//
// It has two tools of its own:
//
//   - lookup_order reads an order through the support person's own shop
//     account, so the shop's permissions and audit log apply to them. The
//     account is a connection: the first time a person's turn needs it,
//     the turn waits until they have connected their shop account.
//   - issue_refund moves money with the business's payments key, which the
//     worker holds. It always needs approval and is not idempotent, so
//     Tollgate runs it at most once per approved call.
package refunds

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// TaskQueue is where the refunds worker serves turns. Its own queue, so
// the agent can be deployed and scaled apart from other Tollgate workers.
const TaskQueue = "refunds"

// ShopProvider is the connection lookup_order needs: a person's shop
// account, stored per user in a connections.Store.
const ShopProvider = "shop"

// Order is what the shop knows about one order.
type Order struct {
	ID       string
	Customer string
	Items    []string
	// Amounts are in cents of Currency: money is never a float.
	TotalCents    int64
	RefundedCents int64
	Currency      string
	Status        string
	// URL is the order's page in the shop's back office, which the model
	// cites and a person opens from the card.
	URL string
}

// Refund is one refund the shop issued.
type Refund struct {
	ID          string
	OrderID     string
	AmountCents int64
	Currency    string
	Reason      string
	OrderURL    string
}

// ErrUnauthorized is what a Shop returns for a token it no longer
// accepts (revoked, expired): the person has to connect again.
var ErrUnauthorized = errors.New("shop: token not accepted")

// ErrNoOrder is what a Shop returns for an order id it does not know.
var ErrNoOrder = errors.New("shop: no such order")

// ErrExceedsPaid is what a Shop returns, wrapped, for a refund larger
// than what is left of the order's total.
var ErrExceedsPaid = errors.New("the refund exceeds what is left to refund")

// Shop is the order system the tools act on. An interface so the agent
// runs against DemoShop here and against the real shop in production.
type Shop interface {
	// Order reads one order with a person's own token.
	Order(ctx context.Context, token, id string) (Order, error)
	// Refund refunds amountCents of an order with the worker's payments
	// key. It is not idempotent: calling it twice refunds twice.
	Refund(ctx context.Context, orderID string, amountCents int64, reason string) (Refund, error)
}

// System is the agent's standing instructions to the model.
const System = "You are a support agent for a small online shop. Look an order up before refunding it, " +
	"refund no more than is left of it, and tell the customer plainly what you did and when the money arrives."

// NewInput is a turn of this agent for a support person and a request:
// its system prompt and its two tools. The caller sets Model.
func NewInput(user, request string) workflows.Input {
	return workflows.Input{
		Prompt: request,
		System: System,
		Tools:  []string{"lookup_order", "issue_refund"},
		// The person the turn runs for: lookup_order reads their shop
		// connection.
		User: user,
	}
}

// Tools are the agent's tools, for tollgate.Options.Tools. conns must be
// the store the plugin gets as Options.Connections, so that a token a
// person stores while their turn waits is the one lookup_order reads.
func Tools(shop Shop, conns connections.Store) []tool.Tool {
	return []tool.Tool{lookupOrder(shop, conns), issueRefund(shop)}
}

// money formats cents of a currency the way people read it.
func money(cents int64, currency string) string {
	return fmt.Sprintf("%d.%02d %s", cents/100, cents%100, currency)
}
