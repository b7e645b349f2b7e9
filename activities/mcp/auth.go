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

	"golang.org/x/oauth2"

	"github.com/tollgate-dev/tollgate/connections"
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
