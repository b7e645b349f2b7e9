package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
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

// A client that gets tokens for itself: with a secret (HTTP Basic), or
// with an ES256-signed assertion whose issuer, subject and audience the
// authorization server checks; the server is the token's resource.
func TestClientCredentialsTokens(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))

	var as *httptest.Server
	var gotResource string
	as = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp":
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": as.URL + "/mcp", "authorization_servers": []string{as.URL}})
		case "/.well-known/oauth-authorization-server":
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": as.URL, "authorization_endpoint": as.URL + "/authorize", "token_endpoint": as.URL + "/token",
				"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "private_key_jwt"}})
		case "/token":
			_ = r.ParseForm()
			gotResource = r.PostForm.Get("resource")
			ok := false
			if id, secret, basic := r.BasicAuth(); basic {
				ok = id == "svc" && secret == "s3cret"
			} else if a := r.PostForm.Get("client_assertion"); a != "" {
				parts := strings.Split(a, ".")
				if len(parts) == 3 {
					var claims struct{ Iss, Sub, Aud string }
					body, _ := base64.RawURLEncoding.DecodeString(parts[1])
					_ = json.Unmarshal(body, &claims)
					sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
					sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
					ok = len(sig) == 64 && ecdsa.Verify(&key.PublicKey, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) &&
						claims.Iss == "svc" && claims.Sub == "svc" && claims.Aud == as.URL
				}
			}
			if !ok || r.PostForm.Get("grant_type") != "client_credentials" {
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
				return
			}
			_, _ = w.Write([]byte(`{"access_token":"svc-token","token_type":"Bearer","expires_in":60}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer as.Close()
	ch := MCPChallenge{ServerURL: as.URL + "/mcp"}
	tok, err := ClientCredentialsToken(context.Background(), ch, ClientCredentials{ClientID: "svc", ClientSecret: "s3cret"})
	require.NoError(t, err)
	require.Equal(t, "svc-token", tok.AccessToken)
	require.Equal(t, as.URL+"/mcp", gotResource)
	tok, err = ClientCredentialsToken(context.Background(), ch, ClientCredentials{ClientID: "svc", PrivateKeyPEM: keyPEM})
	require.NoError(t, err)
	require.Equal(t, "svc-token", tok.AccessToken)
	_, err = ClientCredentialsToken(context.Background(), ch, ClientCredentials{ClientID: "svc", ClientSecret: "wrong"})
	require.ErrorIs(t, err, ErrRefused)
}
