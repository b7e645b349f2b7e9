package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// Cross-app access (enterprise-managed authorization, the MCP extension
// of SEP-990): an identity provider's ID token is exchanged at the
// identity provider for an identity assertion authorization grant
// (ID-JAG, token exchange, RFC 8693), which the MCP server's
// authorization server takes in a JWT bearer grant (RFC 7523) for an
// access token. No person consents in a browser: the identity provider
// vouches for the subject of the ID token.

// Token types and grants of cross-app access.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	grantJWTBearer     = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	tokenTypeIDToken   = "urn:ietf:params:oauth:token-type:id_token"
	tokenTypeIDJAG     = "urn:ietf:params:oauth:token-type:id-jag"
)

// IdentityAssertion is a client of the MCP server's authorization server
// that gets its tokens with an identity provider's ID token.
type IdentityAssertion struct {
	// ClientID and ClientSecret are the client at the MCP server's
	// authorization server.
	ClientID, ClientSecret string
	// IDToken is the identity provider's ID token for the subject.
	IDToken string
	// IdPTokenURL is the identity provider's token endpoint, which does
	// the token exchange; IdPClientID (and IdPClientSecret, if the
	// identity provider wants one) is the client there.
	IdPTokenURL                  string
	IdPClientID, IdPClientSecret string
	Scopes                       []string
	HTTPClient                   *http.Client
}

// IdentityAssertionToken discovers the MCP server's authorization server,
// exchanges the ID token for an ID-JAG for that authorization server and
// the server as the resource, and trades the ID-JAG for an access token.
func IdentityAssertionToken(ctx context.Context, ch MCPChallenge, ia IdentityAssertion) (*oauth2.Token, error) {
	c := clientOrDefault(ia.HTTPClient)
	if ia.ClientID == "" || ia.ClientSecret == "" || ia.IDToken == "" {
		return nil, errors.New("cross-app access needs a client id, a client secret and an ID token")
	}
	if err := checkURL(ia.IdPTokenURL); err != nil {
		return nil, fmt.Errorf("identity provider token URL: %w", err)
	}
	reg, err := discoverMCP(ctx, "service", ch, MCPClient{RedirectURL: "http://localhost/unused", ClientID: ia.ClientID, ClientSecret: ia.ClientSecret, HTTPClient: c}, false)
	if err != nil {
		return nil, err
	}
	audience := reg.Issuer
	if audience == "" {
		audience = reg.TokenURL
	}
	exchange := url.Values{
		"grant_type":           {grantTokenExchange},
		"subject_token":        {ia.IDToken},
		"subject_token_type":   {tokenTypeIDToken},
		"requested_token_type": {tokenTypeIDJAG},
		"audience":             {audience},
		"resource":             {reg.Resource},
	}
	scopes := ia.Scopes
	if len(scopes) == 0 {
		scopes = reg.Scopes
	}
	if len(scopes) > 0 {
		exchange.Set("scope", strings.Join(scopes, " "))
	}
	var idpUser, idpPass string
	switch {
	case ia.IdPClientSecret != "":
		idpUser, idpPass = ia.IdPClientID, ia.IdPClientSecret
	case ia.IdPClientID != "":
		exchange.Set("client_id", ia.IdPClientID)
	}
	grant, err := postToken(ctx, c, ia.IdPTokenURL, exchange, idpUser, idpPass)
	if err != nil {
		return nil, fmt.Errorf("token exchange at the identity provider: %w", err)
	}
	if grant.issuedType != "" && grant.issuedType != tokenTypeIDJAG {
		return nil, fmt.Errorf("token exchange at the identity provider: it issued a %q, not an ID-JAG", grant.issuedType)
	}
	bearer := url.Values{"grant_type": {grantJWTBearer}, "assertion": {grant.token.AccessToken}}
	if len(scopes) > 0 {
		bearer.Set("scope", strings.Join(scopes, " "))
	}
	user, pass := ia.ClientID, ia.ClientSecret
	if reg.AuthMethod == "client_secret_post" {
		bearer.Set("client_id", ia.ClientID)
		bearer.Set("client_secret", ia.ClientSecret)
		user, pass = "", ""
	}
	tok, err := postToken(ctx, c, reg.TokenURL, bearer, user, pass)
	if err != nil {
		return nil, fmt.Errorf("JWT bearer grant: %w", err)
	}
	return tok.token, nil
}

// issued is a token endpoint's answer.
type issued struct {
	token      *oauth2.Token
	issuedType string
}

// postToken posts form to a token endpoint, with client_secret_basic
// when user is set.
func postToken(ctx context.Context, c *http.Client, tokenURL string, form url.Values, user, pass string) (issued, error) {
	body := form.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(body))
	if err != nil {
		return issued{}, fmt.Errorf("token request: %w", err)
	}
	if user != "" {
		req.SetBasicAuth(url.QueryEscape(user), url.QueryEscape(pass))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return issued{}, fmt.Errorf("token request at %s: %w", tokenURL, err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken     string `json:"access_token"`
		IssuedTokenType string `json:"issued_token_type"`
		ExpiresIn       int64  `json:"expires_in"`
		Error           string `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxConfigFile)).Decode(&out)
	if resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		if out.Error != "" {
			return issued{}, fmt.Errorf("token request at %s: %w (%s)", tokenURL, ErrRefused, clip(out.Error))
		}
		return issued{}, fmt.Errorf("token request at %s: the server answered %s", tokenURL, resp.Status)
	}
	tok := &oauth2.Token{AccessToken: out.AccessToken, TokenType: "Bearer"}
	if out.ExpiresIn > 0 {
		tok.Expiry = time.Now().Add(time.Duration(out.ExpiresIn) * time.Second)
	}
	return issued{token: tok, issuedType: out.IssuedTokenType}, nil
}

// clip bounds a server's error code in an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}
