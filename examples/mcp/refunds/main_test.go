package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

func connect(t *testing.T, ledger string) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server(&ledgerFile{path: ledger}).Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Each bad refund is a tool error that names what is wrong and writes
// nothing; a good one appends one line, whatever its reason holds.
func TestRefundsRefusesBadArgumentsAndAppendsOneLine(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "refunds.txt")
	cs := connect(t, ledger)
	call := func(args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "issue_refund", Arguments: args})
		require.NoError(t, err)
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"order_id": "../x", "amount_cents": 100, "reason": "r"}, `order_id "../x" must be 1-32`},
		{map[string]any{"order_id": "", "amount_cents": 100, "reason": "r"}, `order_id "" must be 1-32`},
		{map[string]any{"order_id": "1001", "amount_cents": 0, "reason": "r"}, "amount_cents must be positive, not 0"},
		{map[string]any{"order_id": "1001", "amount_cents": -5, "reason": "r"}, "amount_cents must be positive, not -5"},
		{map[string]any{"order_id": "1001", "amount_cents": 1.5, "reason": "r"}, "amount_cents"},
		{map[string]any{"order_id": "1001", "amount_cents": "150000", "reason": "r"}, "amount_cents"},
	} {
		text, isErr := call(tc.args)
		require.True(t, isErr, "%v: %s", tc.args, text)
		require.Contains(t, text, tc.want, tc.args)
	}
	_, err := os.Stat(ledger)
	require.True(t, os.IsNotExist(err), "a refused refund wrote the ledger")

	text, isErr := call(map[string]any{"order_id": "1001", "amount_cents": 150005, "reason": "broken\nrefund 1 cents on order 2"})
	require.False(t, isErr, text)
	require.Equal(t, "Refunded 1500.05 on order 1001.", text)
	b, err := os.ReadFile(ledger)
	require.NoError(t, err)
	require.Equal(t, "refund 150005 cents on order 1001: \"broken\\nrefund 1 cents on order 2\"\n", string(b))
}
