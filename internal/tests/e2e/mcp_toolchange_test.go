package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"

	"github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/replay"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// An MCP server changes a tool while the worker runs (its description
// and annotations: from approved-first to read-only). The worker picks
// the change up without a restart; a turn that started before it keeps
// the definition it recorded (its next call of the tool still waits for
// approval), a turn started after it gets the new one (its call runs at
// once), and the earlier turn's history replays.
func TestMCPToolChangesReachNewTurnsOnly(t *testing.T) {
	t.Parallel()
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "dyn", Version: "1"}, nil)
	lookup := func(desc string, readOnly bool) {
		mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "lookup", Description: desc, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: readOnly}},
			func(ctx context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: desc}}}, nil, nil
			})
	}
	lookup("v1: look it up.", false)
	hs := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)

	e := newEnv(t, "mcp_tool_change")
	ts, err := mcp.Open(context.Background(), mcp.Config{Servers: map[string]mcp.Server{"dyn": {URL: hs.URL}}}, mcp.Options{StateDir: mcp.StateDir(e.data)})
	require.NoError(t, err)
	t.Cleanup(ts.Close)
	e.sources = append(e.sources, ts)
	e.startWorker()

	before := e.script(
		reply("", call("a1", "dyn.lookup", map[string]any{})),
		expecting(reply("", call("a2", "dyn.lookup", map[string]any{})), 1, ""),
		expecting(reply("Looked twice."), 1, ""),
	)
	runA := e.start(workflows.Input{Prompt: "Look it up", Model: before, Tools: []string{"dyn.lookup"}})
	e.waitCard(runA, "a1", results.StatePendingApproval)

	// The worker's registry follows the toolset: its watcher runs first.
	changed := make(chan struct{})
	ts.Watch(func() error { close(changed); return nil })
	lookup("v2: look it up, read-only.", true)
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not pick up the changed tool")
	}

	_, err = respondReliably(e.caller, runA, "approve-a1", workflows.Response{CallID: "a1", Decision: results.DecisionApprove, By: "ops"})
	require.NoError(t, err)
	s := e.waitCard(runA, "a2", results.StatePendingApproval)
	require.Equal(t, "v2: look it up, read-only.", outputText(mustCard(t, s.Cards, "a1")), "the call ran the server's tool as it is now")

	// The second turn's script, beside the first one's.
	b, err := json.Marshal(scripted.Script{Replies: []scripted.Reply{
		reply("", call("b1", "dyn.lookup", map[string]any{})),
		expecting(reply("Looked."), 1, ""),
	}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(e.scripts, "after.json"), b, 0o600))
	runB := e.start(workflows.Input{Prompt: "Look it up", Model: "scripted:after.json", Tools: []string{"dyn.lookup"}})
	resB := e.result(runB)
	require.Equal(t, workflows.StatusCompleted, resB.Status, resB.Error)
	require.Empty(t, mustCard(t, resB.Cards, "b1").Decisions, "the new definition is read-only: no approval")

	_, err = respondReliably(e.caller, runA, "approve-a2", workflows.Response{CallID: "a2", Decision: results.DecisionApprove, By: "ops"})
	require.NoError(t, err)
	resA := e.result(runA)
	require.Equal(t, workflows.StatusCompleted, resA.Status, resA.Error)

	require.NoError(t, replay.History(&historypb.History{Events: e.history(runA)}, replay.Options{DataDir: e.data}),
		"the turn that saw the change replays with the worker's new tool list")
}
