package gateway_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/fileblob"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/results"
)

// devGateway is the gateway in dev mode on e's task queue, as `worker
// --dev` builds it, said to listen on 127.0.0.1:8080. Its requests are
// served in-process (serveDev), so each says where it comes from.
func (e *env) devGateway() *gateway.Server {
	e.t.Helper()
	dev, err := gateway.New(gateway.Options{
		Temporal: e.caller, TaskQueue: e.tq, Keys: e.keys, Links: e.signer, Dev: true, Addr: "127.0.0.1:8080",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(e.t, err)
	return dev
}

// devCall is one request to an in-process gateway from a loopback
// address; host empty means the listen address.
type devCall struct {
	method, path, host, body string
	header                   map[string]string
}

func serveDev(t testing.TB, h http.Handler, c devCall) response {
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req := httptest.NewRequest(c.method, c.path, body)
	req.RemoteAddr = "127.0.0.1:5555"
	req.Host = c.host
	if c.host == "" {
		req.Host = "127.0.0.1:8080"
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return response{code: w.Code, header: w.Header(), body: w.Body.String()}
}

func with(h map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for hk, hv := range h {
		out[hk] = hv
	}
	return out
}

var jsonType = map[string]string{"Content-Type": "application/json"}

// A web page open in the developer's browser must not
// drive the dev gateway. Without a key, only the gateway's own origin
// (or a client that is no browser) is let in, and JSON routes take only
// application/json, which no page can send to another origin without a
// CORS preflight the gateway never grants.
func TestDevModeAnswersOnlyItsOwnOrigin(t *testing.T) {
	e := newEnv(t, envOptions{})
	dev := e.devGateway()
	id := e.park("", "one", "dev", 1)
	startBody := func(id string) string {
		e.turns = append(e.turns, id)
		return `{"id":"` + id + `","prompt":"hi","model":"gw:one","tools":["deploy"]}`
	}
	approve := `{"call_id":"d1","decision":"approve","arguments":{"env":"production"}}`

	cross := map[string]map[string]string{
		// Same site (ports do not count), another origin.
		"a page on another loopback port":                with(jsonType, "Origin", "http://127.0.0.1:9999"),
		"a page on localhost":                            with(jsonType, "Origin", "http://localhost:8080"),
		"a page of another site":                         with(jsonType, "Origin", "https://evil.example"),
		"an opaque origin":                               with(jsonType, "Origin", "null"),
		"fetch metadata same-site":                       with(jsonType, "Sec-Fetch-Site", "same-site"),
		"fetch metadata cross-site":                      with(jsonType, "Sec-Fetch-Site", "cross-site"),
		"a same-site page claiming the gateway's origin": with(with(jsonType, "Origin", "http://127.0.0.1:8080"), "Sec-Fetch-Site", "same-site"),
	}
	n := 0
	for name, hdr := range cross {
		n++
		r := serveDev(t, dev, devCall{method: "POST", path: "/v1/turns", body: startBody(e.name + "-cross-" + string(rune('a'+n))), header: hdr})
		require.Equal(t, http.StatusForbidden, r.code, "%s: %s", name, r.body)
		require.Contains(t, r.error(t), "only from its own pages", name)
		r = serveDev(t, dev, devCall{method: "POST", path: "/v1/turns/" + id + "/respond", body: approve, header: hdr})
		require.Equal(t, http.StatusForbidden, r.code, "%s: %s", name, r.body)
		r = serveDev(t, dev, devCall{method: "GET", path: "/v1/turns", header: hdr})
		require.Equal(t, http.StatusForbidden, r.code, "%s: %s", name, r.body)
	}

	// The no-cors attack: a simple request's content types, no Origin
	// (as an old browser or a plain client would send them).
	for _, ct := range []string{"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		hdr := map[string]string{"Content-Type": ct}
		r := serveDev(t, dev, devCall{method: "POST", path: "/v1/turns", body: startBody(e.name + "-plain"), header: hdr})
		require.Equal(t, http.StatusUnsupportedMediaType, r.code, "%q: %s", ct, r.body)
		require.Contains(t, r.error(t), "Content-Type: application/json", ct)
		r = serveDev(t, dev, devCall{method: "POST", path: "/v1/turns/" + id + "/respond", body: approve, header: hdr})
		require.Equal(t, http.StatusUnsupportedMediaType, r.code, "%q: %s", ct, r.body)
	}

	// Nothing above started or answered anything.
	s, err := e.state(id)
	require.NoError(t, err)
	require.Equal(t, results.StatePendingApproval, card(t, s, "d1").State)
	_, err = e.state(e.name + "-plain")
	require.Error(t, err, "no turn was started by a text/plain body")

	// The gateway's own pages, and clients that are no browser, are in.
	own := with(with(jsonType, "Origin", "http://127.0.0.1:8080"), "Sec-Fetch-Site", "same-origin")
	r := serveDev(t, dev, devCall{method: "POST", path: "/v1/turns", body: startBody(e.name + "-own"), header: own})
	require.Equal(t, http.StatusCreated, r.code, r.body)
	r = serveDev(t, dev, devCall{method: "GET", path: "/v1/turns?limit=1", header: map[string]string{"Sec-Fetch-Site": "none"}})
	require.Equal(t, http.StatusOK, r.code, "typed into the address bar: %s", r.body)
	r = serveDev(t, dev, devCall{method: "POST", path: "/v1/turns/" + id + "/respond", body: `{"call_id":"d1","decision":"approve"}`,
		header: map[string]string{"Content-Type": "application/json; charset=utf-8"}})
	require.Equal(t, http.StatusOK, r.code, "curl: %s", r.body)

	// With a key the same rule holds for the content type.
	ops := e.key("ops", allScopes)
	r = e.do(request{method: "POST", path: "/v1/turns", key: ops, body: startBody(e.name + "-keyed"), header: map[string]string{"Content-Type": "text/plain"}})
	require.Equal(t, http.StatusUnsupportedMediaType, r.code, r.body)
}

// DNS rebinding. A page whose own name now resolves to
// 127.0.0.1 talks to the gateway as its own origin; only the Host header
// shows it, so every route but /healthz refuses a Host the gateway does
// not answer to.
func TestDevModeRefusesOtherHosts(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	dev := e.devGateway()
	for _, host := range []string{"rebind.evil.example:8080", "rebind.evil.example", "127.0.0.1:9999", "localhost.evil.example:8080", "127.0.0.1.nip.io:8080", "0x7f000001:8080"} {
		origin := map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"}
		for _, c := range []devCall{
			{method: "GET", path: "/v1/turns"},
			{method: "GET", path: "/v1/turns/x"},
			{method: "POST", path: "/v1/turns", body: `{"prompt":"hi","model":"gw:one"}`, header: with(origin, "Content-Type", "application/json")},
			{method: "POST", path: "/v1/turns/x/respond", body: `{"call_id":"d1","decision":"approve"}`, header: with(origin, "Content-Type", "application/json")},
			{method: "GET", path: "/inbox"},
			{method: "POST", path: "/inbox/respond", body: "turn=x&call=d1&action=approve", header: with(origin, "Content-Type", "application/x-www-form-urlencoded")},
			{method: "GET", path: "/v1/links/x"},
			{method: "GET", path: "/v1/nothing"},
			{method: "GET", path: "/"},
		} {
			c.host = host
			if c.header == nil {
				c.header = origin
			}
			r := serveDev(t, dev, c)
			require.Equal(t, http.StatusMisdirectedRequest, r.code, "%s %s for %s: %s", c.method, c.path, host, r.body)
			require.Contains(t, r.body, "does not answer to the host name "+host, c.path)
			require.Empty(t, r.header.Get("Set-Cookie"), "no session for a foreign host")
		}
	}
	// Liveness probes use whatever address reaches the process; the
	// answer says nothing and changes nothing.
	require.Equal(t, http.StatusOK, serveDev(t, dev, devCall{method: "GET", path: "/healthz", host: "10.0.0.7:8080"}).code)

	for _, host := range []string{"127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "[::1]:8080"} {
		r := serveDev(t, dev, devCall{method: "GET", path: "/v1/turns?limit=1", host: host})
		require.Equal(t, http.StatusOK, r.code, "%s: %s", host, r.body)
	}
}

// Ids in paths that no turn can have are the caller's
// mistake, said in a sentence, not a 500.
func TestMalformedTurnIDs(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	ops := e.key("ops", allScopes)
	for _, id := range []string{"x%0Ay", "x%0D%0Ay", "x%00", "%FF%FE", "x%09y", "x%7F", strings.Repeat("x", 1001)} {
		r := e.do(request{method: "GET", path: "/v1/turns/" + id, key: ops})
		require.Equal(t, http.StatusBadRequest, r.code, "%s: %s", id, r.body)
		require.Contains(t, r.error(t), "is not a turn id", id)
		r = e.do(request{method: "POST", path: "/v1/turns/" + id + "/respond", key: ops, body: `{"call_id":"d1","decision":"approve"}`})
		require.Equal(t, http.StatusBadRequest, r.code, "%s: %s", id, r.body)
		require.Contains(t, r.error(t), "is not a turn id", id)
	}
	// The inbox's form names a turn too.
	browser := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(browser, ops).code)
	csrf := csrfOf(t, e.inbox(browser).body)
	r := postForm(t, browser, e.http.URL, "/inbox/respond", url.Values{"csrf": {csrf}, "turn": {"x\ny"}, "call": {"d1"}, "action": {"approve"}})
	require.Equal(t, http.StatusBadRequest, r.code, r.body)
	require.Contains(t, r.body, "is not a turn id")

	// Ids of session turns (with a slash) and unusual but valid ones
	// still reach Temporal: 404, not 400.
	for _, id := range []string{"no-such-session%2Fturn-1", "caf%C3%A9", "a%20b"} {
		r := e.do(request{method: "GET", path: "/v1/turns/" + id, key: ops})
		require.NotEqual(t, http.StatusBadRequest, r.code, "%s: %s", id, r.body)
	}
}

// Signing out ends the session on the server, so a
// copy of the cookie (in another browser, a proxy's log) stops working.
func TestSignOutEndsTheSession(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	ops := e.key("ops", readAnswer)
	browser := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(browser, ops).code)
	u, _ := url.Parse(e.http.URL)
	copied := browserClient(t)
	copied.Jar.SetCookies(u, browser.Jar.Cookies(u))
	require.Contains(t, e.inbox(copied).body, "Sign out", "the copy works while the session lasts")

	r := postForm(t, browser, e.http.URL, "/inbox/logout", url.Values{"csrf": {csrfOf(t, e.inbox(browser).body)}})
	require.Equal(t, http.StatusSeeOther, r.code)
	require.Contains(t, e.inbox(browser).body, "Sign in")
	page := e.inbox(copied)
	require.Contains(t, page.body, "Sign in", "a copied cookie ends with its session")
	require.NotContains(t, page.body, "Sign out")
}

// An Idempotency-Key names one response. Sent again
// with the same body it is the same response (applied once, answered
// again); with another body it is a mistake, said with 422, never the
// first response's card as if the second had been applied. Temporal
// keeps what the key first carried, so a restarted gateway (or another
// replica) knows it too.
func TestIdempotencyKeyWithAnotherBody(t *testing.T) {
	e := newEnv(t, envOptions{})
	ops := e.key("ops", readAnswer)
	id := e.park("", "two", "ann", 2)
	respond := func(base, body string) response {
		return doWith(t, http.DefaultClient, base, request{method: "POST", path: "/v1/turns/" + id + "/respond", key: ops, body: body,
			header: map[string]string{"Idempotency-Key": "TICKET-4711"}})
	}
	first := `{"call_id":"d1","decision":"approve","arguments":{"env":"staging","version":"2.0.0"}}`
	r := respond(e.http.URL, first)
	require.Equal(t, http.StatusOK, r.code, r.body)
	// A retry, spelled differently but the same JSON: the same answer.
	r = respond(e.http.URL, `{ "decision": "approve", "call_id": "d1", "arguments": {"version": "2.0.0", "env": "staging"} }`)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Equal(t, "d1", decodeJSON[results.Card](t, r.body).CallID)

	for _, other := range []string{
		`{"call_id":"n1","decision":"approve"}`,
		`{"call_id":"d1","decision":"deny","reason":"no"}`,
		`{"call_id":"d1","decision":"approve"}`,
		`{"call_id":"d1","decision":"approve","arguments":{"env":"production","version":"2.0.0"}}`,
	} {
		r = respond(e.http.URL, other)
		require.Equal(t, http.StatusUnprocessableEntity, r.code, "%s: %s", other, r.body)
		require.Contains(t, r.error(t), "Idempotency-Key TICKET-4711 was already used for another response", other)
	}
	// Another gateway process (a restart, a replica) knows it as well.
	other := httptest.NewServer(e.srv)
	t.Cleanup(other.Close)
	r = respond(other.URL, `{"call_id":"n1","decision":"approve"}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.code, r.body)

	s, err := e.state(id)
	require.NoError(t, err)
	require.True(t, card(t, s, "n1").State.Waiting(), "the second body was not applied")
	require.Len(t, card(t, s, "d1").Decisions, 1)
}

// Item 5 with replicas: gateways that share a session store (and the
// session secret) share sessions, so a sign-out on one ends the session
// on every one; sessions also end by themselves after SessionTTL.
func TestSignOutEndsTheSessionOnEveryReplica(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	ops := e.key("ops", readAnswer)
	bucket, err := fileblob.OpenBucket(t.TempDir(), &fileblob.Options{Metadata: fileblob.MetadataDontWrite})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bucket.Close() })
	secret := []byte(strings.Repeat("k", 32))
	replica := func(ttl time.Duration) *env {
		srv, err := gateway.New(gateway.Options{Temporal: e.caller, TaskQueue: e.tq, Keys: e.keys, SessionSecret: secret, SessionTTL: ttl,
			Sessions: gateway.NewBucketSessions(bucket, time.Hour), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		r := *e
		r.srv, r.http = srv, httptest.NewServer(srv)
		t.Cleanup(r.http.Close)
		return &r
	}
	a, b := replica(time.Hour), replica(time.Hour)
	browser := browserClient(t)
	require.Equal(t, http.StatusSeeOther, a.login(browser, ops).code)
	onB := browserClient(t)
	ua, _ := url.Parse(a.http.URL)
	ub, _ := url.Parse(b.http.URL)
	onB.Jar.SetCookies(ub, browser.Jar.Cookies(ua))
	require.Contains(t, b.inbox(onB).body, "Sign out", "replica b knows a's session")

	r := postForm(t, onB, b.http.URL, "/inbox/logout", url.Values{"csrf": {csrfOf(t, b.inbox(onB).body)}})
	require.Equal(t, http.StatusSeeOther, r.code)
	require.Contains(t, a.inbox(browser).body, "Sign in", "signed out on b ends the session on a")

	short := replica(time.Second)
	require.Equal(t, http.StatusSeeOther, short.login(browser, ops).code)
	us, _ := url.Parse(short.http.URL)
	kept := browserClient(t)
	for _, c := range browser.Jar.Cookies(us) {
		// A copy that ignores the cookie's own expiry.
		kept.Jar.SetCookies(us, []*http.Cookie{{Name: c.Name, Value: c.Value, Path: "/"}})
	}
	require.Contains(t, short.inbox(kept).body, "Sign out")
	time.Sleep(1100 * time.Millisecond)
	require.Contains(t, short.inbox(kept).body, "Sign in", "the session expired")
}
