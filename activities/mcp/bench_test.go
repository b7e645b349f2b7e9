package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// What one call costs, from Run to its outcome: a tool in the worker's
// process, an MCP tool over stdio (a process per call: start, handshake,
// call, stop) and one over streamable HTTP (a session per call).
func BenchmarkCallOverhead(b *testing.B) {
	type args struct {
		Name string `json:"name"`
	}
	inProcess := tool.MustFunc(tool.Spec{Name: "set", Description: "d"}, func(_ context.Context, _ tool.Call, a args) (results.Outcome, error) {
		return results.SucceedText("set " + a.Name), nil
	})
	stdio := openStdio(b, nil).tool(b, "t.upsert")
	h := newHTTPFixture(b, nil)
	h.connect(b, "ada", "user-token")
	httpTool := h.tool(b, "h.upsert")
	for _, bc := range []struct {
		name string
		t    tool.Tool
	}{{"in-process", inProcess}, {"mcp-stdio", stdio}, {"mcp-http", httpTool}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				out, err := bc.t.Run(ctx, tool.Call{TurnID: "bench", CallID: fmt.Sprint(i), User: "ada", Arguments: json.RawMessage(`{"name":"x"}`)})
				require.NoError(b, err)
				require.Equal(b, results.KindSuccess, out.Kind)
			}
		})
	}
}
