package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
)

// An MCP tool's progress notifications reach the turn's live events as
// tool_progress events of the call, through RunTool as any tool's
// stream.Progress does.
func TestRunToolForwardsMCPProgress(t *testing.T) {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "p", Version: "1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "index", Description: "Index files.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			token := req.Params.GetProgressToken()
			if token == nil {
				return nil, nil, fmt.Errorf("no progress token")
			}
			for i := 1; i <= 2; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 2, Message: fmt.Sprintf("file %d", i)}); err != nil {
					return nil, nil, err
				}
			}
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "indexed"}}}, nil, nil
		})
	hs := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	ts, err := mcp.Open(context.Background(), mcp.Config{Servers: map[string]mcp.Server{"files": {URL: hs.URL}}}, mcp.Options{})
	require.NoError(t, err)
	t.Cleanup(ts.Close)

	acts := newActivities(t, ts.Tools()...)
	pub := &recorded{}
	acts.Events = pub
	out, err := runTool(t, newEnv(acts), acts, RunToolInput{TurnID: "turn-m", CallID: "c1", Session: "s1", Tool: "files.index"})
	require.NoError(t, err)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)

	var got []mcp.Progress
	for _, ev := range pub.all() {
		require.Equal(t, stream.TypeToolProgress, ev.Type)
		require.Equal(t, "turn-m", ev.Turn)
		require.Equal(t, "s1", ev.Session)
		require.Equal(t, "c1", ev.ToolCallID)
		var p mcp.Progress
		require.NoError(t, json.Unmarshal(ev.Progress, &p))
		got = append(got, p)
	}
	require.Equal(t, []mcp.Progress{{Progress: 1, Total: 2, Message: "file 1"}, {Progress: 2, Total: 2, Message: "file 2"}}, got)
}
