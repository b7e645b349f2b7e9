package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/apikey"
)

// Cookie names.
const (
	sessionCookie = "tollgate_session"
	linkCookie    = "tollgate_link"
)

// session is what the inbox's signed cookie holds. A session without Key
// and Dev is anonymous: it exists so the login form's CSRF token has
// something to be bound to. A signed-in session (Key) lives only while
// the server's SessionStore has it: the signature says the cookie is
// ours, the store that it was not signed out of. Anonymous and dev
// sessions carry no authority of their own (a dev session works only for
// a request that would be let in as dev anyway), so they are not stored.
type session struct {
	// ID is random; CSRF tokens are bound to it, and a login issues a new
	// one so a session id planted before login is worth nothing after.
	ID string `json:"i"`
	// Key is the SHA-256 (hex) of the API key that logged in. The entry is
	// looked up on every request, so a key removed from the keys file
	// ends its sessions at once.
	Key string `json:"k,omitempty"`
	// Dev marks the anonymous dev-mode principal.
	Dev     bool  `json:"d,omitempty"`
	Expires int64 `json:"e"`
}

func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// mac is the HMAC-SHA256 of parts under the server's secret, with a label
// first so one use's MAC is never valid for another.
func (s *Server) mac(label string, parts ...string) []byte {
	h := hmac.New(sha256.New, s.secret)
	h.Write([]byte(label))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return h.Sum(nil)
}

func (s *Server) encodeSession(sess session) string {
	b, _ := json.Marshal(sess)
	p := base64.RawURLEncoding.EncodeToString(b)
	return p + "." + base64.RawURLEncoding.EncodeToString(s.mac("session", p))
}

func (s *Server) decodeSession(v string) (session, bool) {
	p, sig, ok := strings.Cut(v, ".")
	if !ok {
		return session{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac("session", p)) {
		return session{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return session{}, false
	}
	var sess session
	if json.Unmarshal(b, &sess) != nil || sess.ID == "" || time.Now().Unix() >= sess.Expires {
		return session{}, false
	}
	return sess, true
}

// setSession writes the session cookie: HttpOnly (no script reads it),
// SameSite=Strict (no other site's page sends it), Secure over TLS.
func (s *Server) setSession(w http.ResponseWriter, r *http.Request, sess session) {
	http.SetCookie(w, &http.Cookie{
		Name:     sessionCookie,
		Value:    s.encodeSession(sess),
		Path:     "/",
		MaxAge:   int(time.Until(time.Unix(sess.Expires, 0)).Seconds()),
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
}

func clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// viewer is who an inbox request acts for.
type viewer struct {
	sess session
	// who is set when the session is logged in (or dev).
	who *apikey.Entry
}

// resolveSession reads the request's session; without a valid one it
// starts an anonymous session and sets its cookie, and in dev mode a
// loopback caller is logged in as "dev" at once (for a form, only one
// the gateway's own page sent).
func (s *Server) resolveSession(w http.ResponseWriter, r *http.Request) viewer {
	dev := s.devPage(r)
	if c, err := r.Cookie(sessionCookie); err == nil {
		if sess, ok := s.decodeSession(c.Value); ok {
			switch {
			case sess.Key != "":
				if e, ok := s.signedIn(r.Context(), sess); ok {
					return viewer{sess: sess, who: &e}
				}
			case sess.Dev && dev:
				d := s.devUser
				return viewer{sess: sess, who: &d}
			case !sess.Dev && !dev:
				return viewer{sess: sess}
			}
		}
	}
	sess := session{ID: newSessionID(), Expires: time.Now().Add(s.opts.SessionTTL).Unix()}
	v := viewer{sess: sess}
	if dev {
		v.sess.Dev = true
		dev := s.devUser
		v.who = &dev
	}
	s.setSession(w, r, v.sess)
	return v
}

// signedIn is the key entry of a signed-in session that the store still
// has (not signed out of, not expired) and whose key still exists. A
// store that does not answer signs nobody in.
func (s *Server) signedIn(ctx context.Context, sess session) (apikey.Entry, bool) {
	if sess.Key == "" || s.opts.Keys == nil {
		return apikey.Entry{}, false
	}
	rec, ok, err := s.sessions.Lookup(ctx, sess.ID)
	if err != nil {
		s.log.Warn("Inbox session store did not answer; the request is treated as signed out", "error", err)
		return apikey.Entry{}, false
	}
	if !ok || rec.Key != sess.Key || !time.Now().Before(rec.Expires) {
		return apikey.Entry{}, false
	}
	// The key is looked up too: a key removed from the keys file ends its
	// sessions at once.
	return s.opts.Keys.LookupHash(sess.Key)
}

// signIn starts a signed-in session for the key with hash keyHash: a new
// id (one planted before is worth nothing after), recorded in the store,
// then the cookie.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request, keyHash string) error {
	sess := session{ID: newSessionID(), Key: keyHash, Expires: time.Now().Add(s.opts.SessionTTL).Unix()}
	if err := s.sessions.Create(r.Context(), sess.ID, SessionRecord{Key: keyHash, Expires: time.Unix(sess.Expires, 0)}); err != nil {
		return err
	}
	s.setSession(w, r, sess)
	return nil
}

// signOut ends sess on the server (so copies of its cookie stop working)
// and clears the cookie.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request, sess session) error {
	if sess.Key != "" {
		if err := s.sessions.End(r.Context(), sess.ID); err != nil {
			return err
		}
	}
	clearSession(w, r)
	return nil
}

// csrfToken is the token forms of sess carry.
func (s *Server) csrfToken(sess session) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("csrf", sess.ID))
}

func (s *Server) checkCSRF(sess session, token string) bool {
	got, err := base64.RawURLEncoding.DecodeString(token)
	return err == nil && token != "" && hmac.Equal(got, s.mac("csrf", sess.ID))
}

// linkCSRF binds a link page's form to the browser that was shown it (a
// nonce in a cookie) and to the link itself.
func (s *Server) linkCSRF(nonce, token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(s.mac("link-csrf", nonce, string(sum[:])))
}

func (s *Server) checkLinkCSRF(r *http.Request, token string) bool {
	c, err := r.Cookie(linkCookie)
	if err != nil || c.Value == "" {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(r.PostFormValue("csrf"))
	if err != nil {
		return false
	}
	want, _ := base64.RawURLEncoding.DecodeString(s.linkCSRF(c.Value, token))
	return hmac.Equal(got, want)
}
