// Command refunds is a stand-in payments service for trying approval
// rules from `make run`: an MCP server over stdio with one tool,
// issue_refund, which appends each refund to a ledger file instead of
// moving money. examples/policy.yaml has refunds above 1000.00 approved
// by two members of group leads (docs/approvals.md walks through it).
//
// Run it as Tollgate does, with examples/mcp/refunds.json:
//
//	go run ./examples/mcp/refunds --ledger workspace/refunds.txt
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"regexp"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	ledger := flag.String("ledger", "refunds.txt", "file each refund is appended to")
	flag.Parse()
	l := &ledgerFile{path: *ledger}
	if err := server(l).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

type ledgerFile struct {
	mu   sync.Mutex
	path string
}

type refundArgs struct {
	OrderID     string `json:"order_id" jsonschema:"the order to refund"`
	AmountCents int64  `json:"amount_cents" jsonschema:"how much to refund, in cents"`
	Reason      string `json:"reason" jsonschema:"why, in a few words"`
}

var orderID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

func server(l *ledgerFile) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "refunds", Version: "1.0.0"}, nil)
	yes := true
	// Money leaves the business: destructive, so Tollgate asks a person
	// before each call unless a rule says otherwise.
	mcp.AddTool(s, &mcp.Tool{
		Name:        "issue_refund",
		Description: "Refund part or all of an order to the customer's original payment method.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, Title: "Issue a refund"},
	}, l.refund)
	return s
}

func (l *ledgerFile) refund(_ context.Context, _ *mcp.CallToolRequest, a refundArgs) (*mcp.CallToolResult, any, error) {
	switch {
	case !orderID.MatchString(a.OrderID):
		return failed("order_id %q must be 1-32 letters, digits, '_' or '-'", a.OrderID), nil, nil
	case a.AmountCents <= 0:
		return failed("amount_cents must be positive, not %d", a.AmountCents), nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open the ledger: %w", err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "refund %d cents on order %s: %q\n", a.AmountCents, a.OrderID, a.Reason); err != nil {
		return nil, nil, fmt.Errorf("write the ledger: %w", err)
	}
	return text("Refunded %d.%02d on order %s.", a.AmountCents/100, a.AmountCents%100, a.OrderID), nil, nil
}

func text(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func failed(format string, args ...any) *mcp.CallToolResult {
	r := text(format, args...)
	r.IsError = true
	return r
}
