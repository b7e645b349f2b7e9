package gateway

import (
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
// something to be bound to.
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
// loopback caller is logged in as "dev" at once.
func (s *Server) resolveSession(w http.ResponseWriter, r *http.Request) viewer {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if sess, ok := s.decodeSession(c.Value); ok {
			switch {
			case sess.Key != "" && s.opts.Keys != nil:
				if e, ok := s.opts.Keys.LookupHash(sess.Key); ok {
					return viewer{sess: sess, who: &e}
				}
				// The key is gone: the session is over.
			case sess.Dev && s.opts.Dev && fromLoopback(r):
				dev := s.devUser
				return viewer{sess: sess, who: &dev}
			case sess.Key == "" && !sess.Dev && !(s.opts.Dev && fromLoopback(r)):
				return viewer{sess: sess}
			}
		}
	}
	sess := session{ID: newSessionID(), Expires: time.Now().Add(s.opts.SessionTTL).Unix()}
	v := viewer{sess: sess}
	if s.opts.Dev && fromLoopback(r) {
		v.sess.Dev = true
		dev := s.devUser
		v.who = &dev
	}
	s.setSession(w, r, v.sess)
	return v
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
