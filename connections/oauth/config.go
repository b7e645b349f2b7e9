// Package oauth holds the OAuth 2.0 providers an operator configures and
// the flows Tollgate runs with them: the authorization code flow with
// PKCE (S256) that the gateway drives in the person's browser, the
// refresh that keeps a stored token usable before a tool runs, and the
// revocation behind `DELETE /v1/connections/{provider}`.
//
// The client side is golang.org/x/oauth2. The signed tokens the flow
// hands around (a connect link, the state parameter) are
// internal/signedtoken's, as the one-click links are.
// Tokens never appear in an error of this package.
package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/tollgate-dev/tollgate/connections"
)

// Environment variables.
const (
	// EnvConfig names the providers file (the worker's and the gateway's
	// --oauth-providers default).
	EnvConfig = "TOLLGATE_OAUTH_PROVIDERS"
	// CallbackPath is where providers send the browser back; register
	// <redirect_base>/v1/oauth/callback with each provider.
	CallbackPath = "/v1/oauth/callback"
	// maxConfigFile bounds the providers file and a discovery document.
	maxConfigFile = 1 << 20
)

// ProviderConfig is one provider in the operator's file.
type ProviderConfig struct {
	// ID is the provider name tools ask for in connection_required
	// ("github") and the name the token is stored under.
	ID       string `json:"id"`
	ClientID string `json:"client_id"`
	// ClientSecretFile holds the client secret. When empty, the variable
	// TOLLGATE_OAUTH_<ID>_CLIENT_SECRET_FILE (ID upper-cased, '-' and
	// '.' as '_') names the file. A public client (PKCE only) has none.
	ClientSecretFile string `json:"client_secret_file,omitempty"`
	// AuthURL and TokenURL are the endpoints; or Issuer, whose OIDC
	// discovery document (<issuer>/.well-known/openid-configuration)
	// gives them.
	AuthURL  string `json:"auth_url,omitempty"`
	TokenURL string `json:"token_url,omitempty"`
	// RevokeURL is the RFC 7009 revocation endpoint, if the provider has
	// one; discovery fills it too. Without it, disconnecting only forgets
	// the token.
	RevokeURL string   `json:"revoke_url,omitempty"`
	Issuer    string   `json:"issuer,omitempty"`
	Scopes    []string `json:"scopes,omitempty"`
	// RedirectBase overrides the file's redirect_base for this provider.
	RedirectBase string `json:"redirect_base,omitempty"`
}

// Config is the operator's providers file (JSON).
type Config struct {
	// RedirectBase is the gateway's public base URL, as the browser
	// reaches it (https://tollgate.example.com); the redirect URI is
	// RedirectBase + CallbackPath.
	RedirectBase string           `json:"redirect_base"`
	Providers    []ProviderConfig `json:"providers"`
}

// Provider is one configured provider, ready to run flows.
type Provider struct {
	ID        string
	RevokeURL string
	config    oauth2.Config
	client    *http.Client
	// resource is the RFC 8707 resource indicator sent with the
	// authorization and token requests (an MCP server's; empty for a
	// configured provider).
	resource string
}

// Scopes are the scopes the provider is asked for.
func (p *Provider) Scopes() []string { return slices.Clone(p.config.Scopes) }

// Providers are the configured providers by id, and those discovered for
// MCP servers when a registry is attached (WithRegistry).
type Providers struct {
	byID       map[string]*Provider
	discovered Registry
	client     *http.Client
}

// Get returns the provider with id: a configured one, else one the
// registry holds.
func (ps *Providers) Get(id string) (*Provider, bool) {
	if ps == nil {
		return nil, false
	}
	if p, ok := ps.byID[id]; ok {
		return p, true
	}
	if ps.discovered == nil {
		return nil, false
	}
	reg, ok, err := ps.discovered.Load(id)
	if err != nil || !ok {
		return nil, false
	}
	return reg.Provider(ps.client), true
}

// WithRegistry returns ps with the providers r holds besides the
// configured ones (which win on a shared id). The gateway and the
// worker attach the same registry, so a provider the worker discovered
// for an MCP server has a connect link and a callback.
func (ps *Providers) WithRegistry(r Registry, client *http.Client) *Providers {
	out := &Providers{byID: map[string]*Provider{}, discovered: r, client: client}
	if ps != nil {
		maps.Copy(out.byID, ps.byID)
	}
	return out
}

// IDs lists the providers' ids, sorted.
func (ps *Providers) IDs() []string {
	if ps == nil {
		return nil
	}
	ids := make([]string, 0, len(ps.byID))
	for id := range ps.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// LoadOptions are what loading needs besides the file.
type LoadOptions struct {
	// Getenv reads *_FILE variables; os.Getenv if nil.
	Getenv func(string) string
	// HTTPClient talks to the providers (discovery, token, revocation);
	// a client with a 30s timeout if nil.
	HTTPClient *http.Client
}

// LoadConfig reads the providers file at path and builds the providers.
func LoadConfig(ctx context.Context, path string, opts LoadOptions) (*Providers, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("oauth: read the providers file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, fmt.Errorf("oauth: read the providers file %s: %w", path, err)
	}
	if len(data) > maxConfigFile {
		return nil, fmt.Errorf("oauth: the providers file %s is over %d bytes", path, maxConfigFile)
	}
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("oauth: the providers file %s is not valid: %w", path, err)
	}
	ps, err := New(ctx, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return ps, nil
}

// New checks cfg, reads the client secrets, runs discovery where an
// issuer is given, and returns the providers.
func New(ctx context.Context, cfg Config, opts LoadOptions) (*Providers, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	ps := &Providers{byID: map[string]*Provider{}}
	for i, pc := range cfg.Providers {
		p, err := build(ctx, cfg, pc, opts)
		if err != nil {
			name := pc.ID
			if name == "" {
				name = fmt.Sprintf("number %d", i+1)
			}
			return nil, fmt.Errorf("oauth: provider %s: %w", name, err)
		}
		if _, dup := ps.byID[p.ID]; dup {
			return nil, fmt.Errorf("oauth: provider %s is configured twice", p.ID)
		}
		ps.byID[p.ID] = p
	}
	return ps, nil
}

func build(ctx context.Context, cfg Config, pc ProviderConfig, opts LoadOptions) (*Provider, error) {
	if err := connections.ValidName(pc.ID); err != nil {
		return nil, fmt.Errorf("id: %w", err)
	}
	if pc.ClientID == "" {
		return nil, errors.New("client_id is empty")
	}
	base := pc.RedirectBase
	if base == "" {
		base = cfg.RedirectBase
	}
	redirect, err := redirectURL(base)
	if err != nil {
		return nil, err
	}
	if pc.Issuer != "" {
		if err := discover(ctx, opts.HTTPClient, &pc); err != nil {
			return nil, err
		}
	}
	for _, u := range []struct{ name, v string }{{"auth_url", pc.AuthURL}, {"token_url", pc.TokenURL}, {"revoke_url", pc.RevokeURL}} {
		if u.v == "" && u.name == "revoke_url" {
			continue
		}
		if err := checkURL(u.v); err != nil {
			return nil, fmt.Errorf("%s: %w (set it, or an issuer whose discovery document has it)", u.name, err)
		}
	}
	secret, err := clientSecret(pc, opts.Getenv)
	if err != nil {
		return nil, err
	}
	style := oauth2.AuthStyleInHeader
	if secret == "" {
		style = oauth2.AuthStyleInParams
	}
	return &Provider{
		ID:        pc.ID,
		RevokeURL: pc.RevokeURL,
		config: oauth2.Config{
			ClientID:     pc.ClientID,
			ClientSecret: secret,
			Endpoint:     oauth2.Endpoint{AuthURL: pc.AuthURL, TokenURL: pc.TokenURL, AuthStyle: style},
			RedirectURL:  redirect,
			Scopes:       slices.Clone(pc.Scopes),
		},
		client: opts.HTTPClient,
	}, nil
}

// SecretEnv is the variable that names the client secret file of a
// provider whose entry has no client_secret_file.
func SecretEnv(id string) string {
	up := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, id)
	return "TOLLGATE_OAUTH_" + up + "_CLIENT_SECRET_FILE"
}

func clientSecret(pc ProviderConfig, getenv func(string) string) (string, error) {
	path := pc.ClientSecretFile
	from := "client_secret_file"
	if path == "" {
		path = getenv(SecretEnv(pc.ID))
		from = SecretEnv(pc.ID)
	}
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: read the client secret: %w", from, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s: the client secret file %s is empty", from, path)
	}
	return s, nil
}

func redirectURL(base string) (string, error) {
	if base == "" {
		return "", errors.New("redirect_base is empty: set the gateway's public URL (the file's redirect_base or the provider's)")
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("redirect_base %q must be an http or https base URL", base)
	}
	return strings.TrimRight(u.String(), "/") + CallbackPath, nil
}

func checkURL(raw string) error {
	if raw == "" {
		return errors.New("missing")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http or https URL", raw)
	}
	return nil
}

// discover fills the endpoints the entry leaves empty from the issuer's
// OpenID Connect discovery document.
func discover(ctx context.Context, c *http.Client, pc *ProviderConfig) error {
	if err := checkURL(pc.Issuer); err != nil {
		return fmt.Errorf("issuer: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := strings.TrimRight(pc.Issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("issuer: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("discovery at %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("discovery at %s answered %s", u, resp.Status)
	}
	var doc struct {
		Issuer     string `json:"issuer"`
		Auth       string `json:"authorization_endpoint"`
		Token      string `json:"token_endpoint"`
		Revocation string `json:"revocation_endpoint"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxConfigFile)).Decode(&doc); err != nil {
		return fmt.Errorf("discovery at %s: not a discovery document: %w", u, err)
	}
	if strings.TrimRight(doc.Issuer, "/") != strings.TrimRight(pc.Issuer, "/") {
		return fmt.Errorf("discovery at %s names issuer %q, not %q", u, doc.Issuer, pc.Issuer)
	}
	pc.AuthURL = cmpOr(pc.AuthURL, doc.Auth)
	pc.TokenURL = cmpOr(pc.TokenURL, doc.Token)
	pc.RevokeURL = cmpOr(pc.RevokeURL, doc.Revocation)
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
