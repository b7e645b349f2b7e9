// Package oauthtest runs a real OAuth 2.0 authorization server, built on
// github.com/ory/fosite (which implements RFC 6749, 7636, 7009 and
// 7662), for tests and for trying connections on one machine: the
// authorization code flow with PKCE enforced, refresh tokens, revocation,
// introspection, a consent page a person (or a headless browser) clicks,
// and one protected API a tool can call with the token it got.
//
// It is not a provider for production: it has one client, every consent
// is for the same resource owner, and it keeps everything in memory.
package oauthtest

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/storage"
	"golang.org/x/crypto/bcrypt"
)

// Options configure a Server.
type Options struct {
	// ClientID and ClientSecret are the one client's; defaults
	// "tollgate" and "tollgate-dev-secret".
	ClientID, ClientSecret string
	// RedirectURIs the client may use (the gateway's callback); required.
	RedirectURIs []string
	// Scopes the client may ask for; default "repo".
	Scopes []string
	// AccessTokenLifespan; default one hour.
	AccessTokenLifespan time.Duration
	// Subject is the resource owner every consent is for; default
	// "octocat".
	Subject string
	// Addr, when set, is where Start listens (the dev provider);
	// otherwise a free loopback port.
	Addr string
}

// Server is a running authorization server.
type Server struct {
	URL      string
	opts     Options
	provider fosite.OAuth2Provider
	http     *httptest.Server
	// APICalls counts requests to the protected API that carried a valid
	// token.
	APICalls atomic.Int64
}

// Start starts a server; Close stops it.
func Start(o Options) (*Server, error) {
	if o.ClientID == "" {
		o.ClientID = "tollgate"
	}
	if o.ClientSecret == "" {
		o.ClientSecret = "tollgate-dev-secret"
	}
	if len(o.Scopes) == 0 {
		o.Scopes = []string{"repo"}
	}
	if o.AccessTokenLifespan <= 0 {
		o.AccessTokenLifespan = time.Hour
	}
	if o.Subject == "" {
		o.Subject = "octocat"
	}
	if len(o.RedirectURIs) == 0 {
		return nil, fmt.Errorf("oauthtest: no redirect URIs")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(o.ClientSecret), bcrypt.MinCost)
	if err != nil {
		return nil, fmt.Errorf("oauthtest: hash the client secret: %w", err)
	}
	store := storage.NewMemoryStore()
	store.Clients[o.ClientID] = &fosite.DefaultClient{
		ID:            o.ClientID,
		Secret:        hash,
		RedirectURIs:  o.RedirectURIs,
		ResponseTypes: []string{"code"},
		GrantTypes:    []string{"authorization_code", "refresh_token"},
		Scopes:        o.Scopes,
	}
	secret := make([]byte, 32)
	copy(secret, "oauthtest global secret, 32 byte")
	cfg := &fosite.Config{
		GlobalSecret:        secret,
		AccessTokenLifespan: o.AccessTokenLifespan,
		// Every grant gets a refresh token, not only those asking for
		// the offline scope.
		RefreshTokenScopes: []string{},
		EnforcePKCE:        true,
		// The test server speaks plain HTTP on loopback.
		ScopeStrategy:            fosite.ExactScopeStrategy,
		AudienceMatchingStrategy: fosite.DefaultAudienceMatchingStrategy,
	}
	s := &Server{opts: o}
	s.provider = compose.Compose(cfg, store, compose.NewOAuth2HMACStrategy(cfg),
		compose.OAuth2AuthorizeExplicitFactory,
		compose.OAuth2RefreshTokenGrantFactory,
		compose.OAuth2TokenIntrospectionFactory,
		compose.OAuth2TokenRevocationFactory,
		compose.OAuth2PKCEFactory,
	)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", s.consentPage)
	mux.HandleFunc("POST /authorize", s.authorize)
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("POST /revoke", s.revoke)
	mux.HandleFunc("POST /introspect", s.introspect)
	mux.HandleFunc("GET /.well-known/openid-configuration", s.discovery)
	mux.HandleFunc("GET /api/repos/{owner}/{repo}/issues", s.issues)
	s.http = httptest.NewUnstartedServer(mux)
	if o.Addr != "" {
		l, err := net.Listen("tcp", o.Addr)
		if err != nil {
			return nil, fmt.Errorf("oauthtest: listen on %s: %w", o.Addr, err)
		}
		s.http.Listener.Close()
		s.http.Listener = l
	}
	s.http.Start()
	s.URL = s.http.URL
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { s.http.Close() }

// ClientID and ClientSecret are the client's credentials.
func (s *Server) ClientID() string     { return s.opts.ClientID }
func (s *Server) ClientSecret() string { return s.opts.ClientSecret }

// AuthURL, TokenURL and RevokeURL are the endpoints.
func (s *Server) AuthURL() string   { return s.URL + "/authorize" }
func (s *Server) TokenURL() string  { return s.URL + "/token" }
func (s *Server) RevokeURL() string { return s.URL + "/revoke" }

// APIURL is the base of the protected API: GET
// <APIURL>/repos/{owner}/{repo}/issues with a bearer token.
func (s *Server) APIURL() string { return s.URL + "/api" }

// Active reports whether token is a valid access token now.
func (s *Server) Active(ctx context.Context, token string) bool {
	_, _, err := s.provider.IntrospectToken(ctx, token, fosite.AccessToken, &fosite.DefaultSession{})
	return err == nil
}

var consent = template.Must(template.New("consent").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Authorize {{.Client}}</title></head>
<body><h1>Test provider</h1>
<p id="ask">{{.Client}} asks for access to the account of <b>{{.Subject}}</b> with the scopes <code>{{.Scopes}}</code>.</p>
<form method="post" action="/authorize">
{{range $k, $v := .Params}}{{range $v}}<input type="hidden" name="{{$k}}" value="{{.}}">{{end}}{{end}}
<button type="submit" name="consent" value="allow" id="allow">Allow</button>
<button type="submit" name="consent" value="deny" id="deny">Deny</button>
</form></body></html>`))

// consentPage checks the request as fosite does and asks the person.
func (s *Server) consentPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ar, err := s.provider.NewAuthorizeRequest(ctx, r)
	if err != nil {
		s.provider.WriteAuthorizeError(ctx, w, ar, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = consent.Execute(w, map[string]any{
		"Client": ar.GetClient().GetID(), "Subject": s.opts.Subject,
		"Scopes": strings.Join(ar.GetRequestedScopes(), " "), "Params": r.URL.Query(),
	})
}

// authorize is the consent form's answer.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ar, err := s.provider.NewAuthorizeRequest(ctx, r)
	if err != nil {
		s.provider.WriteAuthorizeError(ctx, w, ar, err)
		return
	}
	if r.PostFormValue("consent") != "allow" {
		s.provider.WriteAuthorizeError(ctx, w, ar, fosite.ErrAccessDenied.WithHint("The resource owner denied the request."))
		return
	}
	for _, sc := range ar.GetRequestedScopes() {
		ar.GrantScope(sc)
	}
	resp, err := s.provider.NewAuthorizeResponse(ctx, ar, s.session())
	if err != nil {
		s.provider.WriteAuthorizeError(ctx, w, ar, err)
		return
	}
	s.provider.WriteAuthorizeResponse(ctx, w, ar, resp)
}

func (s *Server) session() *fosite.DefaultSession {
	return &fosite.DefaultSession{Subject: s.opts.Subject, Username: s.opts.Subject}
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ar, err := s.provider.NewAccessRequest(ctx, r, s.session())
	if err != nil {
		s.provider.WriteAccessError(ctx, w, ar, err)
		return
	}
	resp, err := s.provider.NewAccessResponse(ctx, ar)
	if err != nil {
		s.provider.WriteAccessError(ctx, w, ar, err)
		return
	}
	s.provider.WriteAccessResponse(ctx, w, ar, resp)
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s.provider.WriteRevocationResponse(ctx, w, s.provider.NewRevocationRequest(ctx, r))
}

func (s *Server) introspect(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ir, err := s.provider.NewIntrospectionRequest(ctx, r, s.session())
	if err != nil {
		s.provider.WriteIntrospectionError(ctx, w, err)
		return
	}
	s.provider.WriteIntrospectionResponse(ctx, w, ir)
}

func (s *Server) discovery(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"issuer":                           s.URL,
		"authorization_endpoint":           s.AuthURL(),
		"token_endpoint":                   s.TokenURL(),
		"revocation_endpoint":              s.RevokeURL(),
		"introspection_endpoint":           s.URL + "/introspect",
		"response_types_supported":         []string{"code"},
		"code_challenge_methods_supported": []string{"S256"},
	})
}

// issues is the protected API: a GitHub-shaped issue list for any
// repository, for a valid token only.
func (s *Server) issues(w http.ResponseWriter, r *http.Request) {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || !s.Active(r.Context(), tok) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	s.APICalls.Add(1)
	owner, repo := r.PathValue("owner"), r.PathValue("repo")
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode([]map[string]any{
		{"number": 1, "title": "Checkout is slow", "state": "open", "html_url": fmt.Sprintf("https://example.com/%s/%s/issues/1", owner, repo), "user": map[string]string{"login": s.opts.Subject}},
		{"number": 2, "title": "Refunds lack their order", "state": "open", "html_url": fmt.Sprintf("https://example.com/%s/%s/issues/2", owner, repo), "user": map[string]string{"login": s.opts.Subject}},
	})
}
