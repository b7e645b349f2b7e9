package oauth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// MCP servers name their authorization server themselves: a 401 from an
// MCP server starts MCP's authorization discovery (protected-resource
// metadata, RFC 9728; authorization-server metadata, RFC 8414 or OpenID
// discovery), a client registration (a client ID metadata document, a
// pre-registered client or dynamic registration, RFC 7591), and then the
// same authorization code flow with PKCE as a configured provider, with
// the server as the token's resource (RFC 8707). The result is a
// Registration: a provider that was not in the operator's file, kept in a
// Registry that the worker (which discovers) and the gateway (which sends
// the person to consent and takes the code) share.

// MCPClient is how Tollgate presents itself to an MCP server's
// authorization server.
type MCPClient struct {
	// RedirectURL is where the authorization server sends the browser
	// back: the gateway's <redirect_base>/v1/oauth/callback.
	RedirectURL string
	// ClientName is shown on the consent page of a registered client.
	ClientName string
	// ClientMetadataURL is an https URL serving Tollgate's client ID
	// metadata document; where the authorization server accepts such
	// documents, it is the client id and nothing is registered.
	ClientMetadataURL string
	// ClientID and ClientSecret are a client registered with the
	// authorization server beforehand; they win over registration.
	ClientID, ClientSecret string
	// HTTPClient makes the discovery, registration and token requests
	// (a client with a 30s timeout when nil).
	HTTPClient *http.Client
	// Previous is the registration made for this server before, if any:
	// its client is used again with the same authorization server
	// rather than registering another (a scope step-up, say).
	Previous *Registration
}

// MCPChallenge is what the MCP server said when it refused a request.
type MCPChallenge struct {
	// ServerURL is the MCP endpoint that was called.
	ServerURL string
	// ResourceMetadata is the resource_metadata URL of its
	// WWW-Authenticate header, if it sent one.
	ResourceMetadata string
	// Scopes are the scope of its WWW-Authenticate header, if any.
	Scopes []string
}

// Registration is a provider discovered for an MCP server, as the
// registry keeps it. ClientSecret is a secret the authorization server
// issued to Tollgate (empty for a public client).
type Registration struct {
	ID           string    `json:"id"`
	Issuer       string    `json:"issuer,omitempty"`
	AuthURL      string    `json:"auth_url"`
	TokenURL     string    `json:"token_url"`
	ClientID     string    `json:"client_id"`
	ClientSecret string    `json:"client_secret,omitempty"`
	AuthMethod   string    `json:"token_endpoint_auth_method"`
	RedirectURL  string    `json:"redirect_url"`
	Resource     string    `json:"resource,omitempty"`
	Scopes       []string  `json:"scopes,omitempty"`
	Discovered   time.Time `json:"discovered"`
}

// Provider builds the provider a registration describes.
func (r Registration) Provider(client *http.Client) *Provider {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	style := oauth2.AuthStyleInParams
	secret := r.ClientSecret
	switch r.AuthMethod {
	case "client_secret_basic":
		style = oauth2.AuthStyleInHeader
	case "none":
		secret = ""
	}
	return &Provider{
		ID: r.ID,
		config: oauth2.Config{
			ClientID:     r.ClientID,
			ClientSecret: secret,
			Endpoint:     oauth2.Endpoint{AuthURL: r.AuthURL, TokenURL: r.TokenURL, AuthStyle: style},
			RedirectURL:  r.RedirectURL,
			Scopes:       slices.Clone(r.Scopes),
		},
		client:   client,
		resource: r.Resource,
	}
}

// ErrResourceMismatch is protected-resource metadata that names another
// resource than the server that was called: following it would hand the
// person's token for that resource to this server.
var ErrResourceMismatch = errors.New("the protected-resource metadata names another resource than the MCP server")

// DiscoverMCP finds the authorization server of the MCP server that sent
// ch, registers Tollgate with it as cl says, and returns the provider as
// a registration named id.
func DiscoverMCP(ctx context.Context, id string, ch MCPChallenge, cl MCPClient) (Registration, error) {
	return discoverMCP(ctx, id, ch, cl, true)
}

// clientOrDefault is c, or for nil a client whose requests to an
// authorization server give up after 30 seconds.
func clientOrDefault(c *http.Client) *http.Client {
	if c == nil {
		return &http.Client{Timeout: 30 * time.Second}
	}
	return c
}

// discoverMCP is DiscoverMCP; a client that gets tokens for itself has
// no authorization code to protect and needs no PKCE.
func discoverMCP(ctx context.Context, id string, ch MCPChallenge, cl MCPClient, pkce bool) (Registration, error) {
	c := clientOrDefault(cl.HTTPClient)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	server, err := url.Parse(ch.ServerURL)
	if err != nil || (server.Scheme != "http" && server.Scheme != "https") || server.Host == "" {
		return Registration{}, fmt.Errorf("the MCP server URL %q is not an http(s) URL", ch.ServerURL)
	}
	if err := checkURL(cl.RedirectURL); err != nil {
		return Registration{}, fmt.Errorf("redirect URL: %w", err)
	}
	reg := Registration{ID: id, RedirectURL: cl.RedirectURL, Discovered: time.Now().UTC()}

	// Protected-resource metadata: where the challenge says, else at the
	// well-known URI of the server's path, then of its origin.
	var prm *resourceMetadata
	candidates := []string{ch.ResourceMetadata}
	if ch.ResourceMetadata == "" {
		candidates = wellKnown(server, "oauth-protected-resource")
	}
	for _, u := range candidates {
		m, ok, err := fetchJSON[resourceMetadata](ctx, c, u)
		if err != nil {
			return Registration{}, err
		}
		if ok && len(m.AuthorizationServers) > 0 {
			prm = &m
			break
		}
	}
	var issuer *url.URL
	if prm != nil {
		if !resourceCovers(prm.Resource, server) {
			return Registration{}, fmt.Errorf("%w (%q for %s)", ErrResourceMismatch, prm.Resource, redacted(server))
		}
		reg.Resource = prm.Resource
		issuer, err = url.Parse(prm.AuthorizationServers[0])
		if err != nil || (issuer.Scheme != "http" && issuer.Scheme != "https") || issuer.Host == "" {
			return Registration{}, fmt.Errorf("the protected-resource metadata names authorization server %q, not an http(s) URL", prm.AuthorizationServers[0])
		}
	} else {
		// Servers of the 2025-03-26 revision have no such metadata: their
		// origin is the authorization server.
		issuer = &url.URL{Scheme: server.Scheme, Host: server.Host}
		reg.Resource = canonicalResource(server)
	}

	// Authorization-server metadata (RFC 8414, then OpenID discovery, with
	// the issuer's path where it has one); without any, a 2025-03-26
	// server's default endpoints.
	var as *serverMetadata
	for _, u := range metadataURLs(issuer) {
		m, ok, err := fetchJSON[serverMetadata](ctx, c, u)
		if err != nil {
			return Registration{}, err
		}
		if ok && m.AuthorizationEndpoint != "" && m.TokenEndpoint != "" {
			as = &m
			break
		}
	}
	if as == nil {
		if prm != nil {
			return Registration{}, fmt.Errorf("the authorization server %s publishes no metadata (RFC 8414 or OpenID discovery)", redacted(issuer))
		}
		base := issuer.Scheme + "://" + issuer.Host
		as = &serverMetadata{AuthorizationEndpoint: base + "/authorize", TokenEndpoint: base + "/token", RegistrationEndpoint: base + "/register", CodeChallengeMethods: []string{"S256"}}
	}
	if pkce && as.CodeChallengeMethods != nil && !slices.Contains(as.CodeChallengeMethods, "S256") {
		return Registration{}, fmt.Errorf("the authorization server %s does not support PKCE with S256, which Tollgate requires", redacted(issuer))
	}
	for _, u := range []string{as.AuthorizationEndpoint, as.TokenEndpoint} {
		if err := checkURL(u); err != nil {
			return Registration{}, fmt.Errorf("the authorization server's metadata: %w", err)
		}
	}
	reg.Issuer, reg.AuthURL, reg.TokenURL = as.Issuer, as.AuthorizationEndpoint, as.TokenEndpoint

	// Scopes: the challenge's, else every scope the resource supports,
	// else none (the server's default). A refresh token is asked for
	// where the authorization server offers offline access.
	switch {
	case len(ch.Scopes) > 0:
		reg.Scopes = slices.Clone(ch.Scopes)
	case prm != nil && len(prm.ScopesSupported) > 0:
		reg.Scopes = slices.Clone(prm.ScopesSupported)
	}
	if len(reg.Scopes) > 0 && slices.Contains(as.ScopesSupported, "offline_access") && !slices.Contains(reg.Scopes, "offline_access") {
		reg.Scopes = append(reg.Scopes, "offline_access")
	}

	prev := cl.Previous
	switch {
	case cl.ClientID != "":
		reg.ClientID, reg.ClientSecret = cl.ClientID, cl.ClientSecret
		reg.AuthMethod = pickAuthMethod(as.TokenEndpointAuthMethods, cl.ClientSecret != "")
	case prev != nil && prev.ClientID != "" && prev.AuthURL == reg.AuthURL && prev.TokenURL == reg.TokenURL && prev.RedirectURL == reg.RedirectURL:
		reg.ClientID, reg.ClientSecret, reg.AuthMethod = prev.ClientID, prev.ClientSecret, prev.AuthMethod
	case cl.ClientMetadataURL != "" && as.ClientIDMetadataDocumentSupported:
		reg.ClientID, reg.AuthMethod = cl.ClientMetadataURL, "none"
	case as.RegistrationEndpoint != "":
		if err := register(ctx, c, as, cl, &reg); err != nil {
			return Registration{}, err
		}
	default:
		return Registration{}, fmt.Errorf("the authorization server %s offers no client registration and no client is configured for it", redacted(issuer))
	}
	return reg, nil
}

type resourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

type serverMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	CodeChallengeMethods              []string `json:"code_challenge_methods_supported"`
	TokenEndpointAuthMethods          []string `json:"token_endpoint_auth_methods_supported"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported"`
}

// wellKnown are the RFC 9728 locations for a resource: with its path
// inserted after the well-known prefix, then at its origin.
func wellKnown(u *url.URL, name string) []string {
	origin := u.Scheme + "://" + u.Host
	var out []string
	if p := strings.TrimRight(u.EscapedPath(), "/"); p != "" {
		out = append(out, origin+"/.well-known/"+name+p)
	}
	return append(out, origin+"/.well-known/"+name)
}

// metadataURLs are where an issuer's metadata may be: RFC 8414's path
// insertion, OpenID discovery with the path inserted and appended. An
// issuer with a path is never looked up at the bare origin, which would
// be another issuer's.
func metadataURLs(issuer *url.URL) []string {
	origin := issuer.Scheme + "://" + issuer.Host
	p := strings.TrimRight(issuer.EscapedPath(), "/")
	if p == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + p,
		origin + "/.well-known/openid-configuration" + p,
		origin + p + "/.well-known/openid-configuration",
	}
}

// resourceCovers says whether the metadata's resource is the server or a
// parent of it: same origin, and the server's path under the resource's.
func resourceCovers(resource string, server *url.URL) bool {
	r, err := url.Parse(resource)
	if err != nil || !strings.EqualFold(r.Scheme, server.Scheme) || !strings.EqualFold(r.Host, server.Host) {
		return false
	}
	rp := strings.TrimRight(r.Path, "/") + "/"
	sp := strings.TrimRight(server.Path, "/") + "/"
	return strings.HasPrefix(sp, rp)
}

// canonicalResource is the server URL as RFC 8707 names a resource: no
// query or fragment, no trailing slash.
func canonicalResource(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + strings.TrimRight(u.EscapedPath(), "/")
}

func redacted(u *url.URL) string { return u.Scheme + "://" + u.Host + u.EscapedPath() }

// pickAuthMethod chooses how to authenticate at the token endpoint
// among what the server supports (client_secret_basic when it lists
// nothing, as RFC 8414 says).
func pickAuthMethod(supported []string, haveSecret bool) string {
	if !haveSecret {
		return "none"
	}
	if len(supported) == 0 {
		return "client_secret_basic"
	}
	for _, m := range []string{"client_secret_basic", "client_secret_post"} {
		if slices.Contains(supported, m) {
			return m
		}
	}
	return "none"
}

// register asks for a client of our own (RFC 7591).
func register(ctx context.Context, c *http.Client, as *serverMetadata, cl MCPClient, reg *Registration) error {
	if err := checkURL(as.RegistrationEndpoint); err != nil {
		return fmt.Errorf("the registration endpoint: %w", err)
	}
	method := "none"
	if len(as.TokenEndpointAuthMethods) > 0 && !slices.Contains(as.TokenEndpointAuthMethods, "none") {
		method = pickAuthMethod(as.TokenEndpointAuthMethods, true)
	}
	name := cl.ClientName
	if name == "" {
		name = "Tollgate"
	}
	body, err := json.Marshal(map[string]any{
		"client_name":                name,
		"redirect_uris":              []string{cl.RedirectURL},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": method,
	})
	if err != nil {
		return fmt.Errorf("encode the client registration: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, as.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("register at %s: %w", as.RegistrationEndpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("register at %s: %w", as.RegistrationEndpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("register at %s: the authorization server answered %s", as.RegistrationEndpoint, resp.Status)
	}
	var out struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AuthMethod   string `json:"token_endpoint_auth_method"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxConfigFile)).Decode(&out); err != nil || out.ClientID == "" {
		return fmt.Errorf("register at %s: the answer names no client_id", as.RegistrationEndpoint)
	}
	reg.ClientID, reg.ClientSecret = out.ClientID, out.ClientSecret
	reg.AuthMethod = out.AuthMethod
	if reg.AuthMethod == "" {
		// RFC 7591: the default is client_secret_basic, for a client
		// that was given a secret.
		reg.AuthMethod = pickAuthMethod(nil, out.ClientSecret != "")
	}
	return nil
}

// fetchJSON reads a metadata document; a 4xx is "not here" (ok false),
// anything else that is not a JSON 200 is an error.
func fetchJSON[T any](ctx context.Context, c *http.Client, u string) (T, bool, error) {
	var zero T
	if err := checkURL(u); err != nil {
		return zero, false, fmt.Errorf("metadata URL: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return zero, false, fmt.Errorf("metadata at %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := c.Do(req)
	if err != nil {
		return zero, false, fmt.Errorf("metadata at %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return zero, false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return zero, false, fmt.Errorf("metadata at %s: the server answered %s", u, resp.Status)
	}
	var v T
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxConfigFile)).Decode(&v); err != nil {
		return zero, false, fmt.Errorf("metadata at %s is not JSON: %w", u, err)
	}
	return v, true, nil
}

// ClientCredentials is a client that gets tokens for itself (the
// client_credentials grant): a worker's own access to an MCP server, for
// no person in particular.
type ClientCredentials struct {
	ClientID string
	// ClientSecret authenticates with client_secret_basic (or _post,
	// where the server supports only that).
	ClientSecret string
	// PrivateKeyPEM, instead of a secret, signs a JWT assertion
	// (private_key_jwt, RFC 7523) with ES256: a PKCS #8 EC P-256 key.
	PrivateKeyPEM string
	Scopes        []string
	HTTPClient    *http.Client
}

// ClientCredentialsToken discovers the MCP server's authorization server
// and asks it for a token of the client's own, for the server as the
// resource.
func ClientCredentialsToken(ctx context.Context, ch MCPChallenge, cc ClientCredentials) (*oauth2.Token, error) {
	c := clientOrDefault(cc.HTTPClient)
	if cc.ClientID == "" || (cc.ClientSecret == "" && cc.PrivateKeyPEM == "") {
		return nil, errors.New("a client_credentials client needs a client id and a secret or a private key")
	}
	// Discovery needs a redirect URL only to register a client, which a
	// configured client never does.
	reg, err := discoverMCP(ctx, "service", ch, MCPClient{RedirectURL: "http://localhost/unused", ClientID: cc.ClientID, ClientSecret: cc.ClientSecret, HTTPClient: c}, false)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	scopes := cc.Scopes
	if len(scopes) == 0 {
		scopes = reg.Scopes
	}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	if reg.Resource != "" {
		form.Set("resource", reg.Resource)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, reg.TokenURL, nil)
	if err != nil {
		return nil, fmt.Errorf("token request: %w", err)
	}
	switch {
	case cc.PrivateKeyPEM != "":
		aud := reg.Issuer
		if aud == "" {
			aud = reg.TokenURL
		}
		assertion, err := signAssertion(cc.PrivateKeyPEM, cc.ClientID, aud)
		if err != nil {
			return nil, err
		}
		form.Set("client_id", cc.ClientID)
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", assertion)
	case reg.AuthMethod == "client_secret_post":
		form.Set("client_id", cc.ClientID)
		form.Set("client_secret", cc.ClientSecret)
	default:
		req.SetBasicAuth(url.QueryEscape(cc.ClientID), url.QueryEscape(cc.ClientSecret))
	}
	body := form.Encode()
	req.Body = io.NopCloser(strings.NewReader(body))
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("token request at %s: %w", reg.TokenURL, err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxConfigFile)).Decode(&out)
	if resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		if out.Error != "" {
			return nil, fmt.Errorf("token request at %s: %w (%s)", reg.TokenURL, ErrRefused, out.Error)
		}
		return nil, fmt.Errorf("token request at %s: the authorization server answered %s", reg.TokenURL, resp.Status)
	}
	tok := &oauth2.Token{AccessToken: out.AccessToken, TokenType: "Bearer"}
	if out.ExpiresIn > 0 {
		tok.Expiry = time.Now().Add(time.Duration(out.ExpiresIn) * time.Second)
	}
	return tok, nil
}

// signAssertion is an RFC 7523 client assertion signed with ES256.
func signAssertion(keyPEM, clientID, audience string) (string, error) {
	block, _ := pem.Decode([]byte(keyPEM))
	if block == nil {
		return "", errors.New("the private key is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("the private key is not PKCS #8: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		return "", errors.New("the private key is not an EC P-256 key (ES256)")
	}
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	now := time.Now()
	header, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{"iss": clientID, "sub": clientID, "aud": audience, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": hex.EncodeToString(jti)})
	signing := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign the client assertion: %w", err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
