package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

// The well-known locations follow RFC 9728 and RFC 8414 (path inserted),
// then OpenID discovery; an issuer with a path is never looked up at the
// bare origin.
func TestMCPDiscoveryLocations(t *testing.T) {
	require.Equal(t, []string{"https://a.test/.well-known/oauth-protected-resource/mcp", "https://a.test/.well-known/oauth-protected-resource"},
		wellKnown(mustURL(t, "https://a.test/mcp"), "oauth-protected-resource"))
	require.Equal(t, []string{"https://a.test/.well-known/oauth-protected-resource"}, wellKnown(mustURL(t, "https://a.test/"), "oauth-protected-resource"))
	require.Equal(t, []string{"https://as.test/.well-known/oauth-authorization-server", "https://as.test/.well-known/openid-configuration"}, metadataURLs(mustURL(t, "https://as.test")))
	require.Equal(t, []string{
		"https://as.test/.well-known/oauth-authorization-server/tenant1",
		"https://as.test/.well-known/openid-configuration/tenant1",
		"https://as.test/tenant1/.well-known/openid-configuration",
	}, metadataURLs(mustURL(t, "https://as.test/tenant1/")))
}

func TestResourceCoversOnlyTheServerOrItsParents(t *testing.T) {
	server := mustURL(t, "https://a.test/api/mcp")
	require.True(t, resourceCovers("https://a.test/api/mcp", server))
	require.True(t, resourceCovers("https://a.test/api/mcp/", server))
	require.True(t, resourceCovers("https://a.test", server))
	require.True(t, resourceCovers("https://A.test/api", server))
	require.False(t, resourceCovers("https://a.test/ap", server), "a path prefix is not a parent")
	require.False(t, resourceCovers("https://b.test/api/mcp", server))
	require.False(t, resourceCovers("http://a.test/api/mcp", server))
}

// A server of the 2025-03-26 revision has no protected-resource metadata
// and no authorization-server metadata: its origin's default endpoints
// are used, and the client is registered there.
func TestMCPDiscoveryFallsBackToTheServersDefaultEndpoints(t *testing.T) {
	var registered bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/register" {
			registered = true
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"client_id":"c1"}`))
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	reg, err := DiscoverMCP(context.Background(), "legacy", MCPChallenge{ServerURL: srv.URL + "/mcp"}, MCPClient{RedirectURL: "http://127.0.0.1:1/v1/oauth/callback"})
	require.NoError(t, err)
	require.True(t, registered)
	require.Equal(t, srv.URL+"/authorize", reg.AuthURL)
	require.Equal(t, srv.URL+"/token", reg.TokenURL)
	require.Equal(t, "c1", reg.ClientID)
	require.Equal(t, "none", reg.AuthMethod)
	require.Equal(t, srv.URL+"/mcp", reg.Resource)

	p := reg.Provider(nil)
	u, err := url.Parse(p.AuthCodeURL("s", NewVerifier()))
	require.NoError(t, err)
	require.Equal(t, srv.URL+"/mcp", u.Query().Get("resource"))
	require.Equal(t, "S256", u.Query().Get("code_challenge_method"))
}

// A registry's providers are found by Get beside the configured ones.
func TestProvidersFindRegisteredProviders(t *testing.T) {
	r := NewMemoryRegistry()
	ps := (*Providers)(nil).WithRegistry(r, nil)
	_, ok := ps.Get("notes")
	require.False(t, ok)
	require.NoError(t, r.Save(Registration{ID: "notes", AuthURL: "https://as.test/a", TokenURL: "https://as.test/t", ClientID: "c", AuthMethod: "none", RedirectURL: "https://gw.test/v1/oauth/callback"}))
	p, ok := ps.Get("notes")
	require.True(t, ok)
	require.Equal(t, "notes", p.ID)
	require.Error(t, r.Save(Registration{ID: "../x"}), "ids are connection provider names")

	dir := t.TempDir()
	fr, err := NewFileRegistry(dir)
	require.NoError(t, err)
	require.NoError(t, fr.Save(Registration{ID: "notes", ClientID: "c", ClientSecret: "s"}))
	got, ok, err := fr.Load("notes")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "s", got.ClientSecret)
}
