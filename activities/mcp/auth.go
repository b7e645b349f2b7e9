package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/connections/oauth"
)

// userAuth is the SDK's OAuth hook for one session: requests carry the
// turn user's stored credential for the server (the connection provider
// is the server's name), and a 401 ends the session with a challenge
// rather than an authorization flow, because the person who can connect
// an account is not at the worker: the call waits for them instead.
type userAuth struct {
	store    connections.Store
	user     string
	provider string

	mu sync.Mutex
	// sent says a stored credential went with the requests.
	sent      bool
	challenge *challenge
}

// challenge is what a 401 or 403 said.
type challenge struct {
	status           int
	scopes           []string
	resourceMetadata string
	insufficient     bool
}

// errChallenged ends a request the server refused for want of a
// credential.
var errChallenged = errors.New("the server asked for authorization")

func (a *userAuth) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	if a.store == nil || a.user == "" {
		return nil, nil
	}
	cred, err := a.store.Get(ctx, a.user, a.provider)
	if errors.Is(err, connections.ErrNotConnected) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up the %s connection: %w", a.provider, err)
	}
	a.mu.Lock()
	a.sent = true
	a.mu.Unlock()
	return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: cred.Token, TokenType: "Bearer"}), nil
}

func (a *userAuth) Authorize(_ context.Context, _ *http.Request, resp *http.Response) error {
	c := parseChallenge(resp)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	a.mu.Lock()
	a.challenge = c
	a.mu.Unlock()
	return errChallenged
}

func (a *userAuth) result() (*challenge, bool) {
	if a == nil {
		return nil, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.challenge, a.sent
}

// parseChallenge reads the Bearer challenge of WWW-Authenticate (RFC 6750,
// RFC 9728's resource_metadata), bounded: it comes from the server.
func parseChallenge(resp *http.Response) *challenge {
	c := &challenge{status: resp.StatusCode}
	for _, h := range resp.Header.Values("WWW-Authenticate") {
		if len(h) > 4<<10 {
			continue
		}
		scheme, params, _ := strings.Cut(strings.TrimSpace(h), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			continue
		}
		for k, v := range authParams(params) {
			switch strings.ToLower(k) {
			case "scope":
				for _, s := range strings.Fields(v) {
					if len(c.scopes) < 16 && len(s) <= 128 && safeText(s) {
						c.scopes = append(c.scopes, s)
					}
				}
			case "resource_metadata":
				if u, err := url.Parse(v); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && len(v) <= 512 && safeText(v) {
					c.resourceMetadata = v
				}
			case "error":
				c.insufficient = v == "insufficient_scope"
			}
		}
	}
	return c
}

// authParams splits k=v and k="v" pairs separated by commas.
func authParams(s string) map[string]string {
	out := map[string]string{}
	for len(s) > 0 && len(out) < 32 {
		s = strings.TrimLeft(s, " ,")
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			break
		}
		k = strings.TrimSpace(k)
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				break
			}
			v, s = rest[1:1+end], rest[2+end:]
		} else {
			v, s, _ = strings.Cut(rest, ",")
		}
		out[k] = strings.TrimSpace(v)
	}
	return out
}

func safeText(s string) bool {
	for _, r := range s {
		if r < 0x21 || r == 0x7f || r > 0x7e {
			return false
		}
	}
	return true
}

// discoverAuth runs MCP's authorization discovery for the server's
// challenge and keeps the provider it found in the registry, named like
// the server (the connection provider its calls carry).
func (s *server) discoverAuth(ctx context.Context, c *challenge) (oauth.Registration, error) {
	o := s.opts.OAuth
	cl := o.Client
	if s.cfg.OAuth != nil {
		cl.ClientID = s.cfg.OAuth.ClientID
		cl.ClientSecret = ""
		if s.cfg.OAuth.ClientSecret != nil {
			secret, err := s.cfg.OAuth.ClientSecret.resolve(s.opts.Getenv)
			if err != nil {
				return oauth.Registration{}, fmt.Errorf("oauth client_secret: %w", err)
			}
			cl.ClientSecret = secret
		}
	}
	if prev, ok, err := o.Registry.Load(s.name); err == nil && ok {
		cl.Previous = &prev
	}
	if cl.HTTPClient == nil {
		cl.HTTPClient = &http.Client{Timeout: 30 * time.Second}
		if s.opts.HTTPClient != nil {
			cl.HTTPClient.Transport = s.opts.HTTPClient.Transport
		}
	}
	reg, err := oauth.DiscoverMCP(ctx, s.name, oauth.MCPChallenge{ServerURL: s.cfg.URL, ResourceMetadata: c.resourceMetadata, Scopes: c.scopes}, cl)
	if err != nil {
		return oauth.Registration{}, s.redact(err)
	}
	if err := o.Registry.Save(reg); err != nil {
		return oauth.Registration{}, err
	}
	return reg, nil
}

// serviceToken is the worker's own token for a server whose "oauth"
// entry has the client_credentials grant, fetched when there is none or
// it is about to expire.
func (s *server) serviceToken(ctx context.Context) (string, error) {
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	if t := s.svc.token; t != nil && (t.Expiry.IsZero() || time.Until(t.Expiry) > 30*time.Second) {
		return t.AccessToken, nil
	}
	o := s.cfg.OAuth
	if o.Grant == grantIdentityAssertion {
		tok, err := s.identityAssertionToken(ctx)
		if err != nil {
			return "", fmt.Errorf("get the worker's own token for %s: %w", s.name, s.redact(err))
		}
		s.svc.token = tok
		return tok.AccessToken, nil
	}
	cc := oauth.ClientCredentials{ClientID: o.ClientID, Scopes: o.Scopes, HTTPClient: &http.Client{Timeout: 30 * time.Second}}
	if s.opts.HTTPClient != nil {
		cc.HTTPClient.Transport = s.opts.HTTPClient.Transport
	}
	if o.ClientSecret != nil {
		v, err := o.ClientSecret.resolve(s.opts.Getenv)
		if err != nil {
			return "", fmt.Errorf("oauth client_secret: %w", err)
		}
		cc.ClientSecret = v
	}
	if o.PrivateKey != nil {
		v, err := o.PrivateKey.resolvePEM(s.opts.Getenv)
		if err != nil {
			return "", fmt.Errorf("oauth private_key: %w", err)
		}
		cc.PrivateKeyPEM = v
	}
	tok, err := oauth.ClientCredentialsToken(ctx, oauth.MCPChallenge{ServerURL: s.cfg.URL}, cc)
	if err != nil {
		return "", fmt.Errorf("get the worker's own token for %s: %w", s.name, s.redact(err))
	}
	s.svc.token = tok
	return tok.AccessToken, nil
}

// forgetServiceToken drops a token the server refused.
func (s *server) forgetServiceToken() {
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	s.svc.token = nil
}

// serviceTokens caches a server's client_credentials token.
type serviceTokens struct {
	mu    sync.Mutex
	token *oauth2.Token
}

func (s *server) usesServiceToken() bool {
	return s.cfg.OAuth != nil && (s.cfg.OAuth.Grant == grantClientCredentials || s.cfg.OAuth.Grant == grantIdentityAssertion)
}

// identityAssertionToken gets the worker's own token by cross-app access.
func (s *server) identityAssertionToken(ctx context.Context) (*oauth2.Token, error) {
	o := s.cfg.OAuth
	ia := oauth.IdentityAssertion{ClientID: o.ClientID, IdPTokenURL: o.IdPTokenURL, IdPClientID: o.IdPClientID, Scopes: o.Scopes, HTTPClient: &http.Client{Timeout: 30 * time.Second}}
	if s.opts.HTTPClient != nil {
		ia.HTTPClient.Transport = s.opts.HTTPClient.Transport
	}
	secret, err := o.ClientSecret.resolve(s.opts.Getenv)
	if err != nil {
		return nil, fmt.Errorf("oauth client_secret: %w", err)
	}
	ia.ClientSecret = secret
	if ia.IDToken, err = o.IdentityToken.resolve(s.opts.Getenv); err != nil {
		return nil, fmt.Errorf("oauth identity_token: %w", err)
	}
	return oauth.IdentityAssertionToken(ctx, oauth.MCPChallenge{ServerURL: s.cfg.URL}, ia)
}
