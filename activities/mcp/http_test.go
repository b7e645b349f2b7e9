package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// httpFixture is testServer behind streamable HTTP and a bearer check:
// "disc-token" (the worker's discovery credential) and "user-token" (a
// user's connection) pass; "scope-token" lacks a scope (403
// insufficient_scope); "blocked-token" is forbidden outright (403);
// anything else is a 401 with a challenge.
type httpFixture struct {
	srv   *httptest.Server
	conns *connections.MemoryStore
	ts    *Toolset

	mu   sync.Mutex
	seen []http.Header
}

func newHTTPFixture(t testing.TB, mutate func(*Server)) *httpFixture {
	t.Helper()
	f := &httpFixture{conns: connections.NewMemoryStore()}
	mcpServer := testServer()
	handler := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return mcpServer }, nil)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, r.Header.Clone())
		f.mu.Unlock()
		switch r.Header.Get("Authorization") {
		case "Bearer disc-token", "Bearer user-token":
			handler.ServeHTTP(w, r)
		case "Bearer scope-token":
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="notes.admin"`)
			http.Error(w, "more scope", http.StatusForbidden)
		case "Bearer blocked-token":
			http.Error(w, "no", http.StatusForbidden)
		default:
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+"http://"+r.Host+`/.well-known/oauth-protected-resource", scope="notes.read notes.write"`)
			http.Error(w, "who are you", http.StatusUnauthorized)
		}
	}))
	t.Cleanup(f.srv.Close)

	secret := filepath.Join(t.TempDir(), "team")
	require.NoError(t, os.WriteFile(secret, []byte("ops\n"), 0o600))
	srv := Server{
		URL:              f.srv.URL + "/mcp?key=query-secret",
		Headers:          map[string]Secret{"X-Team": {File: secret}},
		DiscoveryHeaders: map[string]Secret{"Authorization": {Env: "DISC", Prefix: "Bearer "}},
	}
	if mutate != nil {
		mutate(&srv)
	}
	env := map[string]string{"DISC": "disc-token"}
	ts, err := Open(context.Background(), Config{Servers: map[string]Server{"h": srv}}, Options{
		Connections: f.conns,
		Getenv:      func(k string) string { return env[k] },
	})
	require.NoError(t, err)
	// Before the server's own Close, which waits for the session kept
	// open to hear the tool list change.
	t.Cleanup(ts.Close)
	f.ts = ts
	return f
}

func (f *httpFixture) tool(t testing.TB, name string) tool.Tool {
	t.Helper()
	for _, tl := range f.ts.Tools() {
		if tl.Spec().Name == name {
			return tl
		}
	}
	require.Failf(t, "no tool", "%s is not among the tools", name)
	return nil
}

func (f *httpFixture) connect(t testing.TB, user, token string) {
	t.Helper()
	require.NoError(t, f.conns.Put(context.Background(), connections.Credential{Provider: "h", User: user, Token: token, CreatedAt: time.Now()}))
}

func TestHTTPServerListsToolsWithTheDiscoveryCredential(t *testing.T) {
	f := newHTTPFixture(t, nil)
	require.Equal(t, tool.ApprovalNever, f.tool(t, "h.read").Spec().Approval)
	f.mu.Lock()
	seen := append([]http.Header(nil), f.seen...)
	f.mu.Unlock()
	for _, h := range seen {
		require.Equal(t, "ops", h.Get("X-Team"), "configured headers go with every request")
	}

	_, err := Open(context.Background(), Config{Servers: map[string]Server{"h": {URL: f.srv.URL + "/mcp"}}}, Options{})
	require.ErrorContains(t, err, "answered HTTP 401 when Tollgate listed its tools")
	require.ErrorContains(t, err, "discovery_headers")
}

// A 401 on a call is the user's missing connection: the call waits for
// it, and "connected" runs it again with the stored credential.
func TestHTTP401BecomesConnectionRequiredAndConnectedRetries(t *testing.T) {
	f := newHTTPFixture(t, nil)
	read := f.tool(t, "h.read")
	call := tool.Call{TurnID: "turn-h", CallID: "call-1", User: "ada", Arguments: json.RawMessage(`{}`)}

	out := run(t, read, call)
	require.Equal(t, results.KindConnectionRequired, out.Kind, "%+v", out)
	require.Equal(t, "h", out.Connection.Provider)
	require.Equal(t, []string{"notes.read", "notes.write"}, out.Connection.Scopes)
	require.Contains(t, out.Connection.Hint, "/.well-known/oauth-protected-resource")
	require.NotContains(t, out.Connection.Hint, "query-secret", "the URL's query stays out of cards")
	f.mu.Lock()
	last := f.seen[len(f.seen)-1]
	f.mu.Unlock()
	require.Empty(t, last.Get("Authorization"), "the discovery credential never goes with a user's call")

	f.connect(t, "ada", "user-token")
	call.Resume = &tool.Resume{Decision: results.DecisionConnected, By: "ada"}
	out = run(t, read, call)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, "hello", out.Success.Parts[0].Text)

	// A turn without a user has nobody to connect.
	out = run(t, read, tool.Call{TurnID: "turn-h", CallID: "call-2"})
	require.Equal(t, results.KindToolError, out.Kind)
	require.Contains(t, out.ToolError.Message, "names no user")
}

func TestHTTPRejectedAndForbiddenCredentials(t *testing.T) {
	f := newHTTPFixture(t, nil)
	read := f.tool(t, "h.read")

	f.connect(t, "bob", "expired-token")
	out := run(t, read, tool.Call{CallID: "c1", User: "bob"})
	require.Equal(t, results.KindConnectionRequired, out.Kind, "an expired token asks for a new connection")
	require.Contains(t, out.Connection.Hint, "connect again")
	out = run(t, read, tool.Call{CallID: "c1", User: "bob", Resume: &tool.Resume{Decision: results.DecisionConnected}})
	require.Equal(t, results.KindToolError, out.Kind, "a connection rejected right after connecting does not loop")
	require.Contains(t, out.ToolError.Message, "rejected the h connection the user just made")

	f.connect(t, "cy", "scope-token")
	out = run(t, read, tool.Call{CallID: "c2", User: "cy"})
	require.Equal(t, results.KindConnectionRequired, out.Kind)
	require.Equal(t, []string{"notes.admin"}, out.Connection.Scopes)

	f.connect(t, "di", "blocked-token")
	out = run(t, read, tool.Call{CallID: "c3", User: "di"})
	require.Equal(t, results.KindToolError, out.Kind)
	require.Contains(t, out.ToolError.Message, "HTTP 403")
}

func TestHTTPElicitationBothProtocols(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("protocol "+version, func(t *testing.T) {
			f := newHTTPFixture(t, func(s *Server) { s.ProtocolVersion = version })
			f.connect(t, "ada", "user-token")
			ask := f.tool(t, "h.ask")
			call := tool.Call{TurnID: "turn-he", CallID: "call-1", User: "ada", Arguments: json.RawMessage(`{"name":"x"}`)}
			out := run(t, ask, call)
			require.Equal(t, results.KindInterrupt, out.Kind, "%+v", out)
			require.Equal(t, results.InterruptChoice, out.Interrupt.Type)
			call.Resume = answer(`"overwrite"`)
			out = run(t, ask, call)
			require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
			require.Equal(t, "renamed x: overwrite", out.Success.Parts[0].Text)
		})
	}
}

// A tool the server lists only to clients that can elicit is offered (the
// discovery session declares elicitation), and its question, sent on
// the session's standalone stream rather than the call's, reaches the
// person; the answer, completed with the schema's defaults, reaches the
// server when the call is issued again.
func TestStandaloneStreamElicitationReachesThePerson(t *testing.T) {
	f := newHTTPFixture(t, func(s *Server) { s.ProtocolVersion = "2025-11-25" })
	require.NoError(t, f.conns.Put(context.Background(), connections.Credential{User: "ada", Provider: "h", Token: "user-token"}))
	aside := f.tool(t, "h.ask_aside")
	call := tool.Call{TurnID: "turn-s", CallID: "call-1", User: "ada"}
	out := run(t, aside, call)
	require.Equal(t, results.KindInterrupt, out.Kind, "%+v", out)
	require.Equal(t, results.InterruptQuestion, out.Interrupt.Type)
	require.Contains(t, out.Interrupt.Prompt, "Which colour?")
	call.Resume = answer(`{"shade":"dark"}`)
	out = run(t, aside, call)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, `accept {"colour":"blue","shade":"dark"}`, out.Success.Parts[0].Text)
}
