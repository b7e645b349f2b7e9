package gateway_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// login signs browser in with key through the inbox's form.
func (e *env) login(browser *http.Client, key string) response {
	e.t.Helper()
	page := doWith(e.t, browser, e.http.URL, request{method: "GET", path: "/inbox"})
	require.Equal(e.t, http.StatusOK, page.code)
	return postForm(e.t, browser, e.http.URL, "/inbox/login", url.Values{"csrf": {csrfOf(e.t, page.body)}, "key": {key}})
}

func (e *env) inbox(browser *http.Client) response {
	e.t.Helper()
	return doWith(e.t, browser, e.http.URL, request{method: "GET", path: "/inbox"})
}

func TestInboxLogin(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	ops := e.key("ops", readAnswer)
	responder := e.key("responder", []apikey.Scope{apikey.Respond})
	browser := browserClient(t)

	page := e.inbox(browser)
	require.Equal(t, http.StatusOK, page.code)
	require.Contains(t, page.body, "Sign in")
	setCookie := page.header.Get("Set-Cookie")
	require.Contains(t, setCookie, "HttpOnly")
	require.Contains(t, setCookie, "SameSite=Strict")
	require.NotContains(t, setCookie, "Secure", "plain HTTP here; Secure is set over TLS")

	r := postForm(t, browser, e.http.URL, "/inbox/login", url.Values{"key": {ops}})
	require.Equal(t, http.StatusForbidden, r.code, "no CSRF token")
	require.Contains(t, r.body, "CSRF check failed")
	r = postForm(t, http.DefaultClient, e.http.URL, "/inbox/login", url.Values{"key": {ops}, "csrf": {csrfOf(t, page.body)}})
	require.Equal(t, http.StatusForbidden, r.code, "a token without its session")

	r = e.login(browser, ops+"x")
	require.Equal(t, http.StatusUnauthorized, r.code)
	require.Contains(t, r.body, "That API key is not valid.")
	r = e.login(browser, responder)
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.body, "does not have the read scope")

	r = e.login(browser, ops)
	require.Equal(t, http.StatusSeeOther, r.code, r.body)
	require.Equal(t, "/inbox", r.header.Get("Location"))
	require.NotContains(t, r.header.Get("Set-Cookie"), ops, "the cookie never holds the key")
	r = e.inbox(browser)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, "Sign out")
	require.Contains(t, r.body, "<span>ops</span>")

	// A forged cookie is worth nothing.
	forged := browserClient(t)
	u, _ := url.Parse(e.http.URL)
	forged.Jar.SetCookies(u, []*http.Cookie{{Name: "tollgate_session", Value: "eyJpIjoieCIsImsiOiIiLCJlIjo5OTk5OTk5OTk5fQ.AAAA"}})
	require.Contains(t, e.inbox(forged).body, "Sign in")

	r = postForm(t, browser, e.http.URL, "/inbox/logout", url.Values{})
	require.Equal(t, http.StatusForbidden, r.code, "logout needs its CSRF token too")
	r = postForm(t, browser, e.http.URL, "/inbox/logout", url.Values{"csrf": {csrfOf(t, e.inbox(browser).body)}})
	require.Equal(t, http.StatusSeeOther, r.code)
	require.Contains(t, e.inbox(browser).body, "Sign in")
}

func TestInboxAnswersCalls(t *testing.T) {
	e := newEnv(t, envOptions{})
	ops := e.key("ops", readAnswer)
	hostile := e.park("", "hostile", "mallory", 1)
	choice := e.park("", "choice", "ann", 1)
	e.waitListed(hostile, workflows.StatusWaiting)
	e.waitListed(choice, workflows.StatusWaiting)
	browser := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(browser, ops).code)

	page := e.inbox(browser)
	require.Equal(t, http.StatusOK, page.code)
	// The model wrote markup into the arguments: it is shown as text.
	require.NotContains(t, page.body, `<script>alert`)
	require.NotContains(t, page.body, `</pre><script>`)
	require.Contains(t, page.body, html.EscapeString(`\u003c/pre\u003e\u003cscript\u003ealert(\"owned\")`), "the JSON, escaped for HTML")
	require.Contains(t, page.body, "asked by <b>mallory</b>")
	require.Contains(t, page.body, "Ship version 1.2.3 to staging")
	require.Contains(t, page.header.Get("Content-Security-Policy"), "script-src 'nonce-")
	require.Contains(t, page.body, `value="friendly">Friendly</button>`)
	csrf := csrfOf(t, page.body)

	respond := func(form url.Values) response {
		return postForm(t, browser, e.http.URL, "/inbox/respond", form)
	}
	r := respond(url.Values{"turn": {hostile}, "call": {"d1"}, "action": {"approve"}})
	require.Equal(t, http.StatusForbidden, r.code, "no CSRF token")
	r = respond(url.Values{"turn": {hostile}, "call": {"d1"}, "action": {"approve"}, "csrf": {"forged"}})
	require.Equal(t, http.StatusForbidden, r.code)

	// An edit the tool's schema refuses: the sentence beside the call,
	// the person's text kept.
	r = respond(url.Values{"csrf": {csrf}, "turn": {hostile}, "call": {"d1"}, "action": {"edit"}, "arguments": {`{"env": "moon"}`}})
	require.Equal(t, http.StatusUnprocessableEntity, r.code)
	require.Contains(t, r.body, `role="alert">the edited arguments for call d1 do not validate`)
	require.Contains(t, r.body, html.EscapeString(`{"env": "moon"}`)+"</textarea>")
	r = respond(url.Values{"csrf": {csrf}, "turn": {hostile}, "call": {"d1"}, "action": {"edit"}, "arguments": {`{"env": `}})
	require.Equal(t, http.StatusUnprocessableEntity, r.code)
	require.Contains(t, r.body, "The edited arguments are not valid JSON.")
	s, err := e.state(hostile)
	require.NoError(t, err)
	require.Equal(t, results.StatePendingApproval, card(t, s, "d1").State)

	r = respond(url.Values{"csrf": {csrf}, "turn": {hostile}, "call": {"d1"}, "action": {"edit"}, "arguments": {`{"env": "staging", "version": "1.2.4"}`}})
	require.Equal(t, http.StatusSeeOther, r.code, r.body)
	s = e.waitState(hostile, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	c := card(t, s, "d1")
	require.JSONEq(t, `{"env": "staging", "version": "1.2.4"}`, string(c.EditedArguments))
	require.Equal(t, "ops", c.Decisions[0].By)

	r = respond(url.Values{"csrf": {csrf}, "turn": {choice}, "call": {"p1"}, "action": {"choose"}, "answer": {"friendly"}})
	require.Equal(t, http.StatusSeeOther, r.code, r.body)
	s = e.waitState(choice, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	require.Equal(t, "tone: friendly", card(t, s, "p1").Output.Parts[0].Text)

	// The turn has ended meanwhile: the refusal is shown at the top.
	r = respond(url.Values{"csrf": {csrf}, "turn": {choice}, "call": {"p1"}, "action": {"choose"}, "answer": {"formal"}})
	require.Equal(t, http.StatusConflict, r.code)
	require.Contains(t, r.body, "Call p1 of turn "+choice+": the turn "+choice+" has ended; it takes no more responses")
}

func TestInboxScopes(t *testing.T) {
	e := newEnv(t, envOptions{})
	reader := e.key("reader", readOnly)
	notifier := e.key("notifier", readAnswer, "notify")
	id := e.park("", "two", "ann", 2)
	e.waitListed(id, workflows.StatusWaiting)

	browser := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(browser, reader).code)
	page := e.inbox(browser)
	require.Contains(t, page.body, "you can read, not answer")
	require.Contains(t, page.body, `data-call="d1"`)
	require.NotContains(t, page.body, `class="approve-form"`, "no buttons without respond")
	r := postForm(t, browser, e.http.URL, "/inbox/respond", url.Values{"csrf": {csrfOf(t, page.body)}, "turn": {id}, "call": {"d1"}, "action": {"approve"}})
	require.Equal(t, http.StatusForbidden, r.code)

	limited := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(limited, notifier).code)
	page = e.inbox(limited)
	d1 := page.body[strings.Index(page.body, `data-call="d1"`):strings.Index(page.body, `data-call="n1"`)]
	require.NotContains(t, d1, `class="approve-form"`)
	require.Contains(t, d1, "Your key may answer only calls of notify.")
	r = postForm(t, limited, e.http.URL, "/inbox/respond", url.Values{"csrf": {csrfOf(t, page.body)}, "turn": {id}, "call": {"d1"}, "action": {"approve"}})
	require.Equal(t, http.StatusForbidden, r.code)
	r = postForm(t, limited, e.http.URL, "/inbox/respond", url.Values{"csrf": {csrfOf(t, page.body)}, "turn": {id}, "call": {"n1"}, "action": {"deny"}, "reason": {"not now"}})
	require.Equal(t, http.StatusSeeOther, r.code, r.body)
	s, err := e.state(id)
	require.NoError(t, err)
	require.Equal(t, results.StatePendingApproval, card(t, s, "d1").State)
	require.Equal(t, results.StateRefused, card(t, s, "n1").State)
	require.Equal(t, "not now", card(t, s, "n1").Reason)
}

// A call whose tool previews its change shows the diff, escaped.
func TestInboxShowsPreview(t *testing.T) {
	e := newEnv(t, envOptions{})
	ops := e.key("ops", readAnswer)
	id := e.park("", "write", "ann", 1)
	e.waitListed(id, workflows.StatusWaiting)
	s, err := e.state(id)
	require.NoError(t, err)
	require.NotEmpty(t, card(t, s, "w1").Preview, "write_file previews")

	browser := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(browser, ops).code)
	page := e.inbox(browser)
	require.Contains(t, page.body, "Would change <code>notes.md</code>")
	require.Contains(t, page.body, `<span class="add">&#43;&lt;b&gt;second&lt;/b&gt;</span>`)
	require.Contains(t, page.body, `<span class="hunk">@@`)
}

// openStatus opens a stream with the browser's cookies and returns its status
// and content type without reading on.
func openStatus(t *testing.T, browser *http.Client, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := browser.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Content-Type")
}

// The inbox's change notices and the events routes take a signed-in
// session in place of a key, and the session's key decides what they
// reach.
func TestInboxSessionOpensEventStreamsWithinItsKeysReach(t *testing.T) {
	e := newEnv(t, envOptions{events: sharedNATS(t)})
	id := e.park("", "one", "ann", 1)

	code, _ := openStatus(t, browserClient(t), e.http.URL+"/inbox/events")
	require.Equal(t, http.StatusUnauthorized, code, "no session, no notices")

	ops := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(ops, e.key("ops", readAnswer)).code)
	code, ctype := openStatus(t, ops, e.http.URL+"/inbox/events")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "text/event-stream", ctype)
	code, _ = openStatus(t, ops, e.http.URL+"/v1/turns/"+id+"/events")
	require.Equal(t, http.StatusOK, code, "the session's key reads the turn's events")

	bob := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(bob, e.keyFor("bob-only", []apikey.Scope{apikey.Read}, "bob")).code)
	code, _ = openStatus(t, bob, e.http.URL+"/v1/turns/"+id+"/events")
	require.Equal(t, http.StatusNotFound, code, "a session of a key limited to bob does not reach ann's turn")

	off := newEnv(t, envOptions{noWorker: true})
	b := browserClient(t)
	require.Equal(t, http.StatusSeeOther, off.login(b, off.key("ops", readAnswer)).code)
	code, _ = openStatus(t, b, off.http.URL+"/inbox/events")
	require.Equal(t, http.StatusServiceUnavailable, code, "without NATS the page polls instead")
	require.NotContains(t, off.inbox(b).body, "/inbox/events", "and is not told to follow the stream")
}
