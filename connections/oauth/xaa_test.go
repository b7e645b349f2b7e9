package oauth

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// Cross-app access: the ID token is exchanged at the identity provider
// for an ID-JAG naming the authorization server and the MCP server, and
// the ID-JAG is traded, with the client's secret, for the access token.
func TestIdentityAssertionToken(t *testing.T) {
	var exchange, bearer map[string]string
	var basicUser, basicPass string
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		exchange = map[string]string{}
		for k := range r.PostForm {
			exchange[k] = r.PostForm.Get(k)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "the-id-jag", "issued_token_type": tokenTypeIDJAG, "token_type": "N_A"})
	}))
	t.Cleanup(idp.Close)
	var as *httptest.Server
	as = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": as.URL, "authorization_endpoint": as.URL + "/authorize", "token_endpoint": as.URL + "/token",
				"grant_types_supported": []string{grantJWTBearer}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic"}})
		case "/token":
			_ = r.ParseForm()
			bearer = map[string]string{}
			for k := range r.PostForm {
				bearer[k] = r.PostForm.Get(k)
			}
			basicUser, basicPass, _ = r.BasicAuth()
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "access", "token_type": "Bearer", "expires_in": 60})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(as.Close)
	var mcp *httptest.Server
	mcp = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": mcp.URL + "/mcp", "authorization_servers": []string{as.URL}})
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(mcp.Close)

	tok, err := IdentityAssertionToken(context.Background(), MCPChallenge{ServerURL: mcp.URL + "/mcp"}, IdentityAssertion{
		ClientID: "xaa-client", ClientSecret: "xaa-secret", IDToken: "the-id-token", IdPTokenURL: idp.URL + "/token", IdPClientID: "idp-client",
	})
	require.NoError(t, err)
	require.Equal(t, "access", tok.AccessToken)
	require.Equal(t, map[string]string{
		"grant_type": grantTokenExchange, "subject_token": "the-id-token", "subject_token_type": tokenTypeIDToken,
		"requested_token_type": tokenTypeIDJAG, "audience": as.URL, "resource": mcp.URL + "/mcp", "client_id": "idp-client",
	}, exchange)
	require.Equal(t, map[string]string{"grant_type": grantJWTBearer, "assertion": "the-id-jag"}, bearer)
	require.Equal(t, "xaa-client", basicUser)
	require.Equal(t, "xaa-secret", basicPass)

	_, err = IdentityAssertionToken(context.Background(), MCPChallenge{ServerURL: mcp.URL + "/mcp"}, IdentityAssertion{ClientID: "xaa-client", ClientSecret: "s", IDToken: "t", IdPTokenURL: "ftp://idp"})
	require.ErrorContains(t, err, "identity provider token URL")
}
