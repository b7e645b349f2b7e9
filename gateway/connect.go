package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Connections through OAuth (DESIGN "Connections"). A waiting_connection
// card carries a connect link, /v1/connect/{token}, signed for its turn,
// call, user and provider. The link alone does not authorize: whoever
// follows it must be signed in to the inbox as the call's user (dev
// mode's loopback caller may act for anyone), because the token the flow
// stores is used as that user's from then on, and a link forwarded or
// leaked to someone else must not let them plant their own account under
// the user's name. GET shows what would happen; the page's POST (CSRF
// bound to the session) starts the authorization code flow with PKCE:
// the verifier stays in an HttpOnly cookie bound to the flow, the state
// is signed, short-lived and applied once. The callback exchanges the
// code, stores the token and sends `connected` as the user, with the
// Update id derived from the state, so a reloaded callback applies once.

// ConnectOptions turn OAuth connections on.
type ConnectOptions struct {
	// Providers are the operator's OAuth providers.
	Providers *oauth.Providers
	// Store keeps the tokens (the workers' connection store: the same
	// directory, sealed with the same key).
	Store connections.Store
	// PublicURL is the gateway's base URL as browsers reach it, for the
	// links in API answers; empty uses the request's own host.
	PublicURL string
	// LinkTTL is how long a connect link works; default 24h.
	LinkTTL time.Duration
	// StateTTL is how long a person has to consent; default 10 minutes.
	StateTTL time.Duration
}

const (
	oauthCookiePrefix = "tollgate_oauth_"
	connectPath       = "/v1/connect/"
)

// usedStates remembers the flows this process completed, so a second
// callback of one state is refused before the provider is asked; the
// provider's single-use codes and the Update id cover other processes.
type usedStates struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// claim marks id used until exp and reports whether it was free.
func (u *usedStates) claim(id string, exp time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	if u.m == nil {
		u.m = map[string]time.Time{}
	}
	for k, e := range u.m {
		if now.After(e) {
			delete(u.m, k)
		}
	}
	if _, used := u.m[id]; used {
		return false
	}
	u.m[id] = exp
	return true
}

func (u *usedStates) used(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.m[id]
	return ok
}

func (u *usedStates) release(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, id)
}

func (s *Server) connectOpts() *ConnectOptions {
	c := s.opts.Connect
	if c == nil {
		return nil
	}
	if c.LinkTTL <= 0 {
		c.LinkTTL = 24 * time.Hour
	}
	if c.StateTTL <= 0 {
		c.StateTTL = 10 * time.Minute
	}
	return c
}

// ConnectURL mints the connect link of a waiting_connection card of
// turn's user; "" when connections are off or the card is not one.
func (s *Server) ConnectURL(base, turn, user string, c results.Card) string {
	co := s.connectOpts()
	if co == nil || c.State != results.StateWaitingConnection || c.Connection == nil || user == "" {
		return ""
	}
	if _, ok := co.Providers.Get(c.Connection.Provider); !ok {
		return ""
	}
	tok, err := s.opts.Links.SignConnect(signedtoken.ConnectClaims{
		Turn: turn, Call: c.CallID, User: user, Provider: c.Connection.Provider, Expires: time.Now().Add(co.LinkTTL),
	})
	if err != nil {
		s.log.Debug("No connect link for the card", "turn", turn, "call", c.CallID, "error", err)
		return ""
	}
	return base + connectPath + tok
}

// baseURL is where links in an answer to r point.
func (s *Server) baseURL(r *http.Request) string {
	if co := s.connectOpts(); co != nil && co.PublicURL != "" {
		return strings.TrimRight(co.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// connectLinks maps the call ids of cards that wait for a connection to
// their connect links.
func (s *Server) connectLinks(r *http.Request, turn, user string, cards []results.Card) map[string]string {
	var out map[string]string
	for _, c := range cards {
		if u := s.ConnectURL(s.baseURL(r), turn, user, c); u != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[c.CallID] = u
		}
	}
	return out
}

// turnUser reads a turn's user from its TollgateUser search attribute.
func (s *Server) turnUser(ctx context.Context, id string) string {
	d, err := s.opts.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return ""
	}
	p := d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[workflows.UserAttr.GetName()]
	if p == nil {
		return ""
	}
	var user string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &user); err != nil {
		return ""
	}
	return user
}

type connectPage struct {
	pageBase
	Turn, User, Provider string
	Card                 results.Card
	Action, CSRF         string
}

type connectedPage struct {
	pageBase
	Heading, Sentence string
	Problem           bool
}

// sessionWho reads the request's inbox session without starting one:
// a connect link opened from another site arrives without the Strict
// session cookie, and starting a session then would sign the person out.
func (s *Server) sessionWho(w http.ResponseWriter, r *http.Request) (*apikey.Entry, session, bool) {
	if s.devPage(r) {
		v := s.resolveSession(w, r)
		return v.who, v.sess, true
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, session{}, false
	}
	sess, ok := s.decodeSession(c.Value)
	if !ok {
		return nil, session{}, false
	}
	e, ok := s.signedIn(r.Context(), sess)
	if !ok {
		return nil, session{}, false
	}
	return &e, sess, true
}

// checkConnect verifies a connect link, who follows it, and that its
// call still waits for that provider. It writes each refusal's page.
func (s *Server) checkConnect(w http.ResponseWriter, r *http.Request, token string) (signedtoken.ConnectClaims, results.Card, session, bool) {
	co := s.connectOpts()
	if co == nil {
		renderErrorPage(w, http.StatusNotFound, "Connections are off", "This gateway has no OAuth providers configured.", "")
		return signedtoken.ConnectClaims{}, results.Card{}, session{}, false
	}
	claims, err := s.opts.Links.VerifyConnect(token, time.Now())
	if err != nil {
		s.tokenRefused(w, err, "link")
		return signedtoken.ConnectClaims{}, results.Card{}, session{}, false
	}
	if _, ok := co.Providers.Get(claims.Provider); !ok {
		renderErrorPage(w, http.StatusNotFound, "Unknown provider", fmt.Sprintf("This gateway has no OAuth provider %q configured, so it cannot connect it. Ask the operator.", claims.Provider), "")
		return signedtoken.ConnectClaims{}, results.Card{}, session{}, false
	}
	who, sess, ok := s.sessionWho(w, r)
	if !ok || who == nil {
		if r.Method == http.MethodGet && r.URL.Query().Get("continue") == "" {
			// A cross-site navigation does not carry the Strict session
			// cookie; a click on our own page does.
			nonce := newNonce()
			render(w, http.StatusOK, "connect-continue", nonce, connectPage{pageBase: pageBase{Title: "Connect " + claims.Provider, Nonce: nonce}, Provider: claims.Provider, Action: connectPath + token + "?continue=1"})
			return signedtoken.ConnectClaims{}, results.Card{}, session{}, false
		}
		renderErrorPage(w, http.StatusUnauthorized, "Sign in first",
			fmt.Sprintf("Connecting %s stores a token as %s's, so only %s may do it. Sign in to the inbox with %s's key, then open this link again.", claims.Provider, claims.User, claims.User, claims.User), "/inbox")
		return signedtoken.ConnectClaims{}, results.Card{}, session{}, false
	}
	if who.Principal != claims.User && !(s.opts.Dev && who.Principal == DevPrincipal) {
		renderErrorPage(w, http.StatusForbidden, "Not your connection",
			fmt.Sprintf("This link connects %s for %s; you are signed in as %s. Only %s may connect their own account.", claims.Provider, claims.User, who.Principal, claims.User), "")
		return signedtoken.ConnectClaims{}, results.Card{}, session{}, false
	}
	card, ok := s.waitingCard(w, r, claims)
	if !ok {
		return signedtoken.ConnectClaims{}, results.Card{}, session{}, false
	}
	return claims, card, sess, true
}

// waitingCard reads the card of claims' call and checks that it waits
// for claims' provider.
func (s *Server) waitingCard(w http.ResponseWriter, r *http.Request, claims signedtoken.ConnectClaims) (results.Card, bool) {
	card, ok := s.pageCard(w, r, claims.Turn, claims.Call)
	if !ok {
		return results.Card{}, false
	}
	if card.State != results.StateWaitingConnection || card.Connection == nil || card.Connection.Provider != claims.Provider {
		renderErrorPage(w, http.StatusConflict, "No longer waiting",
			fmt.Sprintf("Call %s of turn %s is %s; it no longer waits for a %s connection, so this link does nothing.", card.CallID, claims.Turn, card.State, claims.Provider), "")
		return results.Card{}, false
	}
	return card, true
}

func (s *Server) connectPage(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	claims, card, sess, ok := s.checkConnect(w, r, token)
	if !ok {
		return
	}
	nonce := newNonce()
	p, _ := s.connectOpts().Providers.Get(claims.Provider)
	var b bytes.Buffer
	err := pages.ExecuteTemplate(&b, "connect", connectPage{
		pageBase: pageBase{Title: "Connect " + claims.Provider, Nonce: nonce},
		Turn:     claims.Turn, User: claims.User, Provider: claims.Provider, Card: card,
		Action: connectPath + token, CSRF: s.csrfToken(sess),
	})
	if err != nil {
		s.internal(w, r, "render the connect page", err)
		return
	}
	// render's CSP, except that the form may lead to the provider: its
	// POST answers with a redirect there, and browsers hold redirects of
	// a form submission to form-action too.
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-"+nonce+"'; form-action 'self' "+origin(p.AuthCodeURL("", ""))+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}

// origin is scheme://host of u.
func origin(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Scheme + "://" + p.Host
}

// connectStart is the connect page's POST: it starts the flow.
func (s *Server) connectStart(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	if err := r.ParseForm(); err != nil {
		fail(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	claims, _, sess, ok := s.checkConnect(w, r, token)
	if !ok {
		return
	}
	if !s.checkCSRF(sess, r.PostFormValue("csrf")) {
		renderErrorPage(w, http.StatusForbidden, "Confirm on the link's page",
			"This request did not come from the connect page (its CSRF token is missing or wrong). Open the link again and press the button there.", "")
		return
	}
	co := s.connectOpts()
	p, _ := co.Providers.Get(claims.Provider)
	state := claims
	state.ID = signedtoken.NewID()
	state.Expires = time.Now().Add(co.StateTTL)
	stateTok, err := s.opts.Links.SignState(state)
	if err != nil {
		s.internal(w, r, "start the sign-in", err)
		return
	}
	verifier := oauth.NewVerifier()
	http.SetCookie(w, &http.Cookie{
		Name: oauthCookiePrefix + state.ID, Value: verifier + "." + base64.RawURLEncoding.EncodeToString(s.opts.Links.VerifierMAC(state.ID, verifier)),
		Path: "/v1/oauth/", MaxAge: int(co.StateTTL.Seconds()), HttpOnly: true, Secure: r.TLS != nil,
		// Lax: the provider's redirect back is a cross-site top-level GET,
		// which Lax cookies go with and Strict ones do not.
		SameSite: http.SameSiteLaxMode,
	})
	s.log.Info("OAuth sign-in started", "turn", claims.Turn, "call", claims.Call, "user", claims.User, "provider", claims.Provider)
	http.Redirect(w, r, p.AuthCodeURL(stateTok, verifier), http.StatusSeeOther)
}

// oauthCallback is where the provider sends the browser back.
func (s *Server) oauthCallback(w http.ResponseWriter, r *http.Request) {
	co := s.connectOpts()
	if co == nil {
		renderErrorPage(w, http.StatusNotFound, "Connections are off", "This gateway has no OAuth providers configured.", "")
		return
	}
	q := r.URL.Query()
	raw := q.Get("state")
	if raw == "" {
		renderErrorPage(w, http.StatusBadRequest, "Not a sign-in answer", "This address takes the provider's answer to a sign-in Tollgate started; this request carries no state.", "")
		return
	}
	// The signature first: a forged state learns nothing else.
	claims, err := s.opts.Links.VerifyState(raw, time.Now())
	if err != nil {
		s.tokenRefused(w, err, "sign-in")
		return
	}
	p, ok := co.Providers.Get(claims.Provider)
	if !ok {
		renderErrorPage(w, http.StatusNotFound, "Unknown provider", fmt.Sprintf("This gateway has no OAuth provider %q configured any more.", claims.Provider), "")
		return
	}
	if s.usedStates.used(claims.ID) {
		renderErrorPage(w, http.StatusConflict, "Already done",
			"This sign-in was already completed (the page was reloaded or opened twice). Nothing more happens.", "")
		return
	}
	verifier, ok := s.flowVerifier(r, claims.ID)
	if !ok {
		renderErrorPage(w, http.StatusForbidden, "Sign-in not started here",
			"This answer belongs to a sign-in that was not started in this browser (or its cookie expired), so it is not accepted. Open the connect link again.", "")
		return
	}
	if e := q.Get("error"); e != "" {
		clearFlowCookie(w, r, claims.ID)
		if e == "access_denied" {
			renderErrorPage(w, http.StatusForbidden, "Access not granted",
				fmt.Sprintf("You did not grant Tollgate access to %s, so nothing was stored. Call %s still waits: open the connect link again to connect, or decline the call in the inbox.", claims.Provider, claims.Call), "/inbox")
			return
		}
		renderErrorPage(w, http.StatusBadGateway, "The provider refused",
			fmt.Sprintf("%s answered the sign-in with the error %q, so nothing was stored. Open the connect link again, or ask the operator.", claims.Provider, oauthCode(e)), "")
		return
	}
	code := q.Get("code")
	if code == "" {
		renderErrorPage(w, http.StatusBadRequest, "No code", fmt.Sprintf("%s sent no authorization code.", claims.Provider), "")
		return
	}
	if !s.usedStates.claim(claims.ID, claims.Expires) {
		renderErrorPage(w, http.StatusConflict, "Already done",
			"This sign-in was already completed (the page was reloaded or opened twice). Nothing more happens.", "")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	cred, err := p.Exchange(ctx, claims.User, code, verifier)
	if err != nil {
		s.log.Warn("OAuth code exchange failed", "provider", claims.Provider, "user", claims.User, "error", err)
		s.usedStates.release(claims.ID)
		why := "could not be reached or answered wrongly"
		if errors.Is(err, oauth.ErrRefused) {
			why = "refused the authorization code (it may have been used already, or the sign-in was tampered with)"
		}
		renderErrorPage(w, http.StatusBadGateway, "Code exchange failed",
			fmt.Sprintf("Trading the sign-in for a token failed: %s %s. Nothing was stored; open the connect link again.", claims.Provider, why), "")
		return
	}
	if err := co.Store.Put(ctx, cred); err != nil {
		s.internal(w, r, "store the connection", err)
		return
	}
	clearFlowCookie(w, r, claims.ID)
	s.log.Info("OAuth connection stored", "provider", claims.Provider, "user", claims.User, "turn", claims.Turn, "call", claims.Call)
	s.resumeConnected(w, r, claims)
}

// resumeConnected sends `connected` for the flow's call as its user.
func (s *Server) resumeConnected(w http.ResponseWriter, r *http.Request, claims signedtoken.ConnectClaims) {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	resp := workflows.Response{CallID: claims.Call, Decision: results.DecisionConnected, By: claims.User}
	page := func(code int, heading, sentence string) {
		nonce := newNonce()
		render(w, code, "connected", nonce, connectedPage{pageBase: pageBase{Title: heading, Nonce: nonce}, Heading: heading, Sentence: sentence, Problem: code != http.StatusOK})
	}
	card, err := s.apply(ctx, tollgate.RespondOptions{TurnID: claims.Turn, UpdateID: claims.UpdateID()}, resp)
	if err != nil {
		var rej *tollgate.RejectedError
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &rej), errors.As(err, &nf):
			page(http.StatusConflict, "Connected, but the call no longer waits",
				fmt.Sprintf("Your %s connection is stored for %s. Call %s of turn %s no longer waits for it, so nothing resumed; tools that need %s will use the connection from now on.", claims.Provider, claims.User, claims.Call, claims.Turn, claims.Provider))
		case errors.Is(err, errNoWorker):
			w.Header().Set("Retry-After", retryAfter)
			page(http.StatusServiceUnavailable, "Connected; the call resumes when a worker runs",
				fmt.Sprintf("Your %s connection is stored. No worker took the call's resumption within %s; it is applied when one starts.", claims.Provider, s.opts.RespondTimeout))
		default:
			s.log.Warn("Connected could not be sent", "turn", claims.Turn, "call", claims.Call, "error", err)
			page(http.StatusBadGateway, "Connected, but the call was not told",
				fmt.Sprintf("Your %s connection is stored, but telling call %s failed. Press Connected in the inbox to resume it.", claims.Provider, claims.Call))
		}
		return
	}
	s.log.Info("Connection resumed its call", "turn", claims.Turn, "call", claims.Call, "by", claims.User)
	page(http.StatusOK, "Connected "+claims.Provider,
		fmt.Sprintf("Your %s connection is stored for %s, and call %s (%s) of turn %s runs again (it is now %s). You can close this page.", claims.Provider, claims.User, card.CallID, card.Tool, claims.Turn, card.State))
}

// flowVerifier reads the PKCE verifier of flow id from its cookie and
// checks the cookie was set by this gateway for that flow.
func (s *Server) flowVerifier(r *http.Request, id string) (string, bool) {
	c, err := r.Cookie(oauthCookiePrefix + id)
	if err != nil {
		return "", false
	}
	verifier, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return "", false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.opts.Links.VerifierMAC(id, verifier)) {
		return "", false
	}
	return verifier, true
}

func clearFlowCookie(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{Name: oauthCookiePrefix + id, Value: "", Path: "/v1/oauth/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
}

// oauthCode keeps an error code to the characters RFC 6749 allows, so a
// crafted one cannot say anything else on our page.
func oauthCode(e string) string {
	e = strings.Map(func(r rune) rune {
		if r >= 0x20 && r <= 0x7e && r != '"' && r != '\\' {
			return r
		}
		return -1
	}, e)
	if len(e) > 64 {
		e = e[:64]
	}
	return e
}

// tokenRefused writes the page for a connect link or state Verify
// refused.
func (s *Server) tokenRefused(w http.ResponseWriter, err error, what string) {
	switch {
	case errors.Is(err, signedtoken.ErrExpired) && what == "sign-in":
		renderErrorPage(w, http.StatusGone, "Sign-in expired", "This sign-in took too long and has expired; nothing was stored. Open the connect link again.", "")
	case errors.Is(err, signedtoken.ErrExpired):
		renderErrorPage(w, http.StatusGone, "Link expired", "This connect link has expired. Open the call in the inbox for a new one.", "/inbox")
	case what == "sign-in":
		renderErrorPage(w, http.StatusForbidden, "Invalid sign-in answer", "The state of this sign-in is not valid: it was altered or was not made by this gateway. Nothing was stored.", "")
	default:
		renderErrorPage(w, http.StatusForbidden, "Invalid link", "This connect link is not valid: it was altered, cut short, or signed with a key this gateway does not have.", "")
	}
}

// disconnect is DELETE /v1/connections/{provider}: the caller forgets
// (and, where the provider allows, revokes) their own connection. In dev
// mode ?user= names whose.
func (s *Server) disconnect(w http.ResponseWriter, r *http.Request) {
	co := s.connectOpts()
	p := principal(r)
	provider := r.PathValue("provider")
	if err := connections.ValidName(provider); err != nil {
		fail(w, r, http.StatusBadRequest, "the provider name is not valid: "+err.Error())
		return
	}
	user := p.Principal
	if u := r.URL.Query().Get("user"); u != "" && u != user {
		if !(s.opts.Dev && p.Principal == DevPrincipal) {
			fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s may disconnect only its own connections", p.Principal))
			return
		}
		user = u
	}
	if err := connections.ValidName(user); err != nil {
		fail(w, r, http.StatusBadRequest, "the user name is not valid: "+err.Error())
		return
	}
	if co == nil || co.Store == nil {
		fail(w, r, http.StatusNotFound, "this gateway keeps no connections")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	had, err := oauth.Disconnect(ctx, co.Store, co.Providers, user, provider)
	if err != nil && !had {
		s.internal(w, r, "forget the connection", err)
		return
	}
	if err != nil {
		s.log.Warn("Revocation failed; the token is forgotten", "user", user, "provider", provider, "error", err)
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": fmt.Sprintf("the %s connection of %s is forgotten here, but %s did not confirm the revocation; revoke it there too", provider, user, provider), "disconnected": true})
		return
	}
	if !had {
		fail(w, r, http.StatusNotFound, fmt.Sprintf("%s has no %s connection", user, provider))
		return
	}
	s.log.Info("Connection revoked", "user", user, "provider", provider, "by", p.Principal)
	writeJSON(w, http.StatusOK, map[string]any{"user": user, "provider": provider, "disconnected": true})
}
