package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// loopbackAS is an authorization server of the test's own, on loopback:
// RFC 8414 metadata, dynamic registration, an authorization endpoint
// that consents at once, and a token endpoint that checks PKCE, the
// client and the resource indicator before it issues a token.
type loopbackAS struct {
	srv *httptest.Server

	mu                          sync.Mutex
	registered                  int
	challenge                   string
	authResource, tokenResource string
	scope                       string
	issued                      map[string]string // token -> scope
}

func newLoopbackAS(t *testing.T) *loopbackAS {
	as := &loopbackAS{issued: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		base := "http://" + r.Host
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
			"registration_endpoint": base + "/register", "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_post"},
		})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		as.mu.Lock()
		as.registered++
		as.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": "dyn-client", "client_secret": "dyn-secret", "token_endpoint_auth_method": "client_secret_post", "redirect_uris": req.RedirectURIs})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != "dyn-client" || q.Get("code_challenge_method") != "S256" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		as.mu.Lock()
		as.challenge, as.authResource, as.scope = q.Get("code_challenge"), q.Get("resource"), q.Get("scope")
		as.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		v := back.Query()
		v.Set("code", "the-code")
		v.Set("state", q.Get("state"))
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		as.mu.Lock()
		defer as.mu.Unlock()
		if r.PostForm.Get("grant_type") == "client_credentials" {
			as.tokenResource = r.PostForm.Get("resource")
			if r.PostForm.Get("client_id") != "svc" || r.PostForm.Get("client_secret") != "svc-secret" {
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
				return
			}
			as.issued["svc-token"] = ""
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"access_token":"svc-token","token_type":"Bearer","expires_in":3600}`))
			return
		}
		as.tokenResource = r.PostForm.Get("resource")
		if r.PostForm.Get("code") != "the-code" || base64.RawURLEncoding.EncodeToString(sum[:]) != as.challenge ||
			r.PostForm.Get("client_id") != "dyn-client" || r.PostForm.Get("client_secret") != "dyn-secret" || as.tokenResource != as.authResource {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		tok := "granted-" + as.scope
		as.issued[tok] = as.scope
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600, "scope": as.scope})
	})
	as.srv = httptest.NewServer(mux)
	t.Cleanup(as.srv.Close)
	return as
}

func (as *loopbackAS) valid(token string) bool {
	as.mu.Lock()
	defer as.mu.Unlock()
	_, ok := as.issued[token]
	return ok
}

// protectedMCP is testServer behind bearer tokens of as, with its
// protected-resource metadata; the worker lists tools with disc-token.
func protectedMCP(t *testing.T, as *loopbackAS, resource func(base string) string) *httptest.Server {
	mcpServer := testServer()
	handler := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return mcpServer }, nil)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": resource(srv.URL), "authorization_servers": []string{as.srv.URL}, "scopes_supported": []string{"notes.read"}})
			return
		}
		auth := r.Header.Get("Authorization")
		if auth == "Bearer disc-token" || (len(auth) > 7 && as.valid(auth[7:])) {
			handler.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource/mcp", scope="notes.read"`)
		http.Error(w, "who are you", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// consent does what the connect link and the gateway's callback do: the
// person opens the authorization URL of the provider the registry holds,
// the authorization server redirects with a code, and the code's token
// is stored for the user.
func consent(t *testing.T, ps *oauth.Providers, store connections.Store, user, provider string) {
	t.Helper()
	p, ok := ps.Get(provider)
	require.True(t, ok, "the gateway finds the discovered provider %s", provider)
	verifier := oauth.NewVerifier()
	browser := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.Get(p.AuthCodeURL("st", verifier))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "/v1/oauth/callback", loc.Path)
	cred, err := p.Exchange(context.Background(), user, loc.Query().Get("code"), verifier)
	require.NoError(t, err)
	require.NoError(t, store.Put(context.Background(), cred))
}

// A call to a server behind OAuth that answers 401 waits as
// connection_required for the provider named like the server, which
// Tollgate discovered (protected-resource and authorization-server
// metadata) and registered with (dynamic registration) itself; the
// person consents through the provider the gateway finds in the shared
// registry (PKCE, the server as the resource), and "connected" runs the
// call with the token. No static header carries the user's credential.
func TestOAuthDiscoveryConnectsTheUserAndTheCallResumes(t *testing.T) {
	as := newLoopbackAS(t)
	srv := protectedMCP(t, as, func(base string) string { return base + "/mcp" })
	store := connections.NewMemoryStore()
	registry := oauth.NewMemoryRegistry()
	ts, err := Open(context.Background(), Config{Servers: map[string]Server{"h": {
		URL:              srv.URL + "/mcp",
		DiscoveryHeaders: map[string]Secret{"Authorization": {Value: "Bearer disc-token"}},
	}}}, Options{
		Connections: store,
		OAuth:       &OAuth{Registry: registry, Client: oauth.MCPClient{RedirectURL: "http://127.0.0.1:8787/v1/oauth/callback"}},
	})
	require.NoError(t, err)
	t.Cleanup(ts.Close)
	var read tool.Tool
	for _, tl := range ts.Tools() {
		if tl.Spec().Name == "h.read" {
			read = tl
		}
	}
	require.NotNil(t, read)

	call := tool.Call{TurnID: "turn-o", CallID: "call-1", User: "ada"}
	out := run(t, read, call)
	require.Equal(t, results.KindConnectionRequired, out.Kind, "%+v", out)
	require.Equal(t, "h", out.Connection.Provider)
	require.Equal(t, []string{"notes.read"}, out.Connection.Scopes)
	reg, ok, err := registry.Load("h")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, srv.URL+"/mcp", reg.Resource)
	require.Equal(t, as.srv.URL+"/authorize", reg.AuthURL)

	consent(t, (*oauth.Providers)(nil).WithRegistry(registry, nil), store, "ada", "h")
	as.mu.Lock()
	require.Equal(t, srv.URL+"/mcp", as.authResource, "the resource indicator goes with the authorization request")
	require.Equal(t, srv.URL+"/mcp", as.tokenResource, "and with the token request")
	require.Equal(t, "notes.read", as.scope)
	as.mu.Unlock()

	call.Resume = &tool.Resume{Decision: results.DecisionConnected, By: "ada"}
	out = run(t, read, call)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, "hello", out.Success.Parts[0].Text)

	// Another user's call asks again; the registered client is used
	// again rather than registering another.
	out = run(t, read, tool.Call{TurnID: "turn-o", CallID: "call-2", User: "bob"})
	require.Equal(t, results.KindConnectionRequired, out.Kind)
	as.mu.Lock()
	require.Equal(t, 1, as.registered)
	as.mu.Unlock()
}

// Protected-resource metadata naming another resource is refused: the
// user's token for that resource must not be handed to this server.
func TestOAuthResourceMismatchIsRefused(t *testing.T) {
	as := newLoopbackAS(t)
	srv := protectedMCP(t, as, func(string) string { return "https://elsewhere.invalid/mcp" })
	ts, err := Open(context.Background(), Config{Servers: map[string]Server{"h": {
		URL:              srv.URL + "/mcp",
		DiscoveryHeaders: map[string]Secret{"Authorization": {Value: "Bearer disc-token"}},
	}}}, Options{
		Connections: connections.NewMemoryStore(),
		OAuth:       &OAuth{Registry: oauth.NewMemoryRegistry(), Client: oauth.MCPClient{RedirectURL: "http://127.0.0.1:8787/v1/oauth/callback"}},
	})
	require.NoError(t, err)
	t.Cleanup(ts.Close)
	var read tool.Tool
	for _, tl := range ts.Tools() {
		if tl.Spec().Name == "h.read" {
			read = tl
		}
	}
	out := run(t, read, tool.Call{TurnID: "turn-m", CallID: "call-1", User: "ada"})
	require.Equal(t, results.KindToolError, out.Kind, "%+v", out)
	require.Contains(t, out.ToolError.Message, "another resource")
	as.mu.Lock()
	require.Zero(t, as.registered, "nothing was registered with the authorization server")
	as.mu.Unlock()
}

// A server that lists its tools only to a connected user: Open names the
// provider to connect for the discovery user, and lists them once that
// user has connected.
func TestOAuthDiscoveryUserListsTheTools(t *testing.T) {
	as := newLoopbackAS(t)
	srv := protectedMCP(t, as, func(base string) string { return base + "/mcp" })
	store := connections.NewMemoryStore()
	registry := oauth.NewMemoryRegistry()
	cfg := Config{Servers: map[string]Server{"h": {URL: srv.URL + "/mcp"}}}
	opts := Options{
		Connections: store, DiscoveryUser: "ops", StartTimeout: 20 * time.Second,
		OAuth: &OAuth{Registry: registry, Client: oauth.MCPClient{RedirectURL: "http://127.0.0.1:8787/v1/oauth/callback"}},
	}
	_, err := Open(context.Background(), cfg, opts)
	var need *ConnectionNeeded
	require.ErrorAs(t, err, &need)
	require.Equal(t, ConnectionNeeded{Server: "h", User: "ops", Provider: "h", Scopes: []string{"notes.read"}}, *need)
	consent(t, (*oauth.Providers)(nil).WithRegistry(registry, nil), store, "ops", "h")
	ts, err := Open(context.Background(), cfg, opts)
	require.NoError(t, err)
	t.Cleanup(ts.Close)
	require.NotEmpty(t, ts.Tools())
}

// With the client_credentials grant the worker gets a token of its own
// from the server's authorization server: the tools are listed and a
// call runs without discovery headers and without any user's connection.
func TestOAuthClientCredentialsAreTheWorkersOwnAccess(t *testing.T) {
	as := newLoopbackAS(t)
	srv := protectedMCP(t, as, func(base string) string { return base + "/mcp" })
	ts, err := Open(context.Background(), Config{Servers: map[string]Server{"h": {
		URL:   srv.URL + "/mcp",
		OAuth: &ServerOAuth{ClientID: "svc", ClientSecret: &Secret{Value: "svc-secret"}, Grant: grantClientCredentials},
	}}}, Options{Connections: connections.NewMemoryStore()})
	require.NoError(t, err)
	t.Cleanup(ts.Close)
	var read tool.Tool
	for _, tl := range ts.Tools() {
		if tl.Spec().Name == "h.read" {
			read = tl
		}
	}
	require.NotNil(t, read)
	out := run(t, read, tool.Call{TurnID: "turn-cc", CallID: "call-1"})
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	as.mu.Lock()
	require.Equal(t, srv.URL+"/mcp", as.tokenResource)
	require.Zero(t, as.registered)
	as.mu.Unlock()
}
