package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/apikey"
)

// kind says how a request's errors are written: JSON on the API, a page
// on the inbox and links.
type kind int

const (
	kindAPI kind = iota
	kindPage
)

type ctxKey int

const (
	kindKey ctxKey = iota
	principalKey
)

func (s *Server) api(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), kindKey, kindAPI)))
	})
}

func (s *Server) page(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), kindKey, kindPage)))
	})
}

// fail writes an error with a sentence: {"error": ...} on the API, a page
// elsewhere.
func fail(w http.ResponseWriter, r *http.Request, code int, sentence string) {
	if k, _ := r.Context().Value(kindKey).(kind); k == kindPage {
		renderError(w, code, sentence)
		return
	}
	writeJSON(w, code, map[string]string{"error": sentence})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types are written; a failure here is a bug, and
		// its detail stays out of the response.
		code = http.StatusInternalServerError
		b = []byte(`{"error":"the gateway could not encode its answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// internal logs err for operators and tells the caller only that
// something failed on our side.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, doing string, err error) {
	s.log.Warn("Gateway request failed", "route", r.Pattern, "doing", doing, "error", err)
	fail(w, r, http.StatusInternalServerError, fmt.Sprintf("the gateway could not %s; the operator's log has the details", doing))
}

// principal is the caller a handler acts for.
func principal(r *http.Request) apikey.Entry {
	p, _ := r.Context().Value(principalKey).(apikey.Entry)
	return p
}

// requireScope authenticates the bearer key (or, in dev mode, lets a
// loopback caller without one in as "dev", unless another origin's page
// sent it) and checks the scope.
func (s *Server) requireScope(scope apikey.Scope, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		if !p.Has(scope) {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="tollgate", error="insufficient_scope", scope="%s"`, scope))
			fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s does not have the %s scope this needs", p.Principal, scope))
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
	})
}

// requireScopeOrSession is requireScope for the read-only event streams
// that the gateway's own pages follow: a request without an Authorization
// header may instead carry a signed-in inbox session, whose key then
// counts. The cookie is HttpOnly and SameSite=Strict, so only pages of
// this gateway send it.
func (s *Server) requireScopeOrSession(scope apikey.Scope, h http.HandlerFunc) http.Handler {
	withKey := s.requireScope(scope, h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := s.sessionKey(r); ok && r.Header.Get("Authorization") == "" {
			if !p.Has(scope) {
				fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s does not have the %s scope this needs", p.Principal, scope))
				return
			}
			h(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
			return
		}
		withKey.ServeHTTP(w, r)
	})
}

// sessionKey is the key of the request's signed-in inbox session, if any.
func (s *Server) sessionKey(r *http.Request) (apikey.Entry, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return apikey.Entry{}, false
	}
	sess, ok := s.decodeSession(c.Value)
	if !ok || sess.Key == "" {
		return apikey.Entry{}, false
	}
	return s.signedIn(r.Context(), sess)
}

func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (apikey.Entry, bool) {
	auth := r.Header.Get("Authorization")
	if auth == "" && s.opts.Dev && fromLoopback(r) {
		// A page in the developer's browser may send requests to
		// loopback too; only the gateway's own pages, and clients that
		// are no browser, act as dev without a key.
		if why := crossOrigin(r); why != "" {
			fail(w, r, http.StatusForbidden, fmt.Sprintf("without an API key the dev gateway answers only from its own pages and from clients that are no browser, and %s; send Authorization: Bearer <key> (the dev key is in the data directory's dev-gateway.key)", why))
			return apikey.Entry{}, false
		}
		return s.devUser, true
	}
	challenge := func(errCode, sentence string) (apikey.Entry, bool) {
		v := `Bearer realm="tollgate"`
		if errCode != "" {
			v += fmt.Sprintf(`, error="%s"`, errCode)
		}
		w.Header().Set("WWW-Authenticate", v)
		fail(w, r, http.StatusUnauthorized, sentence)
		return apikey.Entry{}, false
	}
	if auth == "" {
		return challenge("", "this needs an API key: send the header Authorization: Bearer <key>")
	}
	scheme, key, found := strings.Cut(auth, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return challenge("invalid_request", "the Authorization header must be Bearer <key>")
	}
	if s.opts.Keys == nil {
		return challenge("invalid_token", "the API key is not valid")
	}
	p, ok := s.opts.Keys.Lookup(strings.TrimSpace(key))
	if !ok {
		return challenge("invalid_token", "the API key is not valid")
	}
	return p, true
}

// fromLoopback reports whether the request came from a loopback address.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// decodeJSON reads a bounded body, sent as application/json, holding
// exactly one JSON object whose fields all belong to v. It writes the
// error itself and reports false.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if !requireJSON(w, r) {
		return false
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", tooBig.Limit))
			return false
		}
		fail(w, r, http.StatusBadRequest, "the body could not be read")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		fail(w, r, http.StatusBadRequest, "the body is not the expected JSON object: "+jsonProblem(err))
		return false
	}
	if dec.More() {
		fail(w, r, http.StatusBadRequest, "the body holds more than one JSON value")
		return false
	}
	return true
}

// jsonProblem says what was wrong with a body, from encoding/json's
// error; its messages name fields and offsets of the caller's own input.
func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "it is empty"
	case errors.As(err, &syntax):
		return fmt.Sprintf("invalid JSON at byte %d", syntax.Offset)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("field %s must be %s, not %s", typ.Field, typ.Type, typ.Value)
		}
		return fmt.Sprintf("expected %s, not %s", typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return err.Error()
}
