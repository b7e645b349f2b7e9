package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// changingServer is an in-process MCP server over streamable HTTP whose
// tools a test changes while Tollgate is connected.
func changingServer(t *testing.T, opts *mcpsdk.ServerOptions) (*mcpsdk.Server, string) {
	t.Helper()
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "dyn", Version: "1"}, opts)
	addLookup(srv, "Look things up.", false)
	hs := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

func addLookup(srv *mcpsdk.Server, desc string, readOnly bool) {
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "lookup", Description: desc, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: readOnly}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: desc}}}, nil, nil
		})
}

func specOf(t *testing.T, reg *tool.Registry, name string) (tool.Spec, bool) {
	t.Helper()
	tl, ok := reg.Get(name)
	if !ok {
		return tool.Spec{}, false
	}
	return tl.Spec(), true
}

// A server that says its tools changed (notifications/tools/list_changed,
// heard on the session Tollgate keeps open to it) gets its tools listed
// again: a worker's registry following the toolset gains the new tool,
// takes the changed description and policy, and drops the removed tool,
// without a restart and without a periodic refresh.
func TestToolListChangesReachTheRegistry(t *testing.T) {
	srv, url := changingServer(t, nil)
	ts, err := Open(context.Background(), Config{Servers: map[string]Server{"dyn": {URL: url}}}, Options{})
	require.NoError(t, err)
	t.Cleanup(ts.Close)
	reg, err := tool.NewRegistry()
	require.NoError(t, err)
	require.NoError(t, reg.AddSource(ts))
	spec, ok := specOf(t, reg, "dyn.lookup")
	require.True(t, ok)
	require.Equal(t, "Look things up.", spec.Description)
	require.Equal(t, tool.ApprovalAlways, spec.Approval, "not read-only: approved first")

	addLookup(srv, "Look things up, read-only now.", true)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "count", Description: "Count things."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "3"}}}, nil, nil
		})
	require.Eventually(t, func() bool {
		spec, ok := specOf(t, reg, "dyn.lookup")
		_, added := reg.Get("dyn.count")
		return ok && added && spec.Description == "Look things up, read-only now."
	}, 10*time.Second, 20*time.Millisecond, "the changed list reached the registry")
	spec, _ = specOf(t, reg, "dyn.lookup")
	require.Equal(t, tool.ApprovalNever, spec.Approval, "the new annotations set the new policy")

	// The new tool runs like any other.
	count, _ := reg.Get("dyn.count")
	out, err := count.Run(context.Background(), tool.Call{TurnID: "turn-r", CallID: "c1"})
	require.NoError(t, err)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, "3", out.Success.Parts[0].Text)

	srv.RemoveTools("count")
	require.Eventually(t, func() bool {
		_, still := reg.Get("dyn.count")
		return !still
	}, 10*time.Second, 20*time.Millisecond, "the removed tool left the registry")
	require.Len(t, ts.Tools(), 1)
}

// A server that does not say its tools change is listed again on
// Refresh (and every RefreshInterval): no session is kept open to it.
func TestRefreshListsAServerAgain(t *testing.T) {
	srv, url := changingServer(t, &mcpsdk.ServerOptions{Capabilities: &mcpsdk.ServerCapabilities{Tools: &mcpsdk.ToolCapabilities{}}})
	ts, err := Open(context.Background(), Config{Servers: map[string]Server{"dyn": {URL: url}}}, Options{})
	require.NoError(t, err)
	t.Cleanup(ts.Close)
	require.Nil(t, ts.servers[0].watch, "nothing to hear: no session kept")
	reg, err := tool.NewRegistry()
	require.NoError(t, err)
	require.NoError(t, reg.AddSource(ts))

	changed, err := ts.Refresh(context.Background())
	require.NoError(t, err)
	require.False(t, changed, "the same list is no change")

	addLookup(srv, "Look things up better.", false)
	changed, err = ts.Refresh(context.Background())
	require.NoError(t, err)
	require.True(t, changed)
	spec, ok := specOf(t, reg, "dyn.lookup")
	require.True(t, ok)
	require.Equal(t, "Look things up better.", spec.Description)

	// A periodic refresh needs no call of Refresh.
	ts2, err := Open(context.Background(), Config{Servers: map[string]Server{"dyn": {URL: url}}}, Options{RefreshInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(ts2.Close)
	addLookup(srv, "Look things up best.", false)
	require.Eventually(t, func() bool {
		return ts2.Tools()[0].Spec().Description == "Look things up best."
	}, 10*time.Second, 20*time.Millisecond)
}

// A change the registry cannot take leaves the source's earlier tools
// in place, and the registry keeps serving them.
func TestRegistryKeepsASourcesToolsWhenAChangeCannotBeTaken(t *testing.T) {
	a := tool.MustFunc(tool.Spec{Name: "dyn.a", Description: "A."}, func(context.Context, tool.Call, struct{}) (results.Outcome, error) {
		return results.SucceedText("a"), nil
	})
	taken := tool.MustFunc(tool.Spec{Name: "local", Description: "Local."}, func(context.Context, tool.Call, struct{}) (results.Outcome, error) {
		return results.SucceedText("l"), nil
	})
	src := &fakeSource{tools: []tool.Tool{a}}
	reg, err := tool.NewRegistry(taken)
	require.NoError(t, err)
	require.NoError(t, reg.AddSource(src))
	src.tools = []tool.Tool{taken}
	require.ErrorContains(t, src.fn(), "local is already registered")
	_, ok := reg.Get("dyn.a")
	require.True(t, ok, "the earlier tools stay")
	src.tools = nil
	require.NoError(t, src.fn())
	_, ok = reg.Get("dyn.a")
	require.False(t, ok)
	_, ok = reg.Get("local")
	require.True(t, ok, "another's tool is not the source's to remove")
}

type fakeSource struct {
	tools []tool.Tool
	fn    func() error
}

func (f *fakeSource) Tools() []tool.Tool    { return f.tools }
func (f *fakeSource) Watch(fn func() error) { f.fn = fn }
