package gateway_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf is the CSRF token of the first form on a page.
func csrfOf(t testing.TB, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	require.NotNil(t, m, "no csrf field on the page:\n%s", page)
	return m[1]
}

// link signs a link for a call as it waits now, in the turn's current run.
func (e *env) link(turn, call string, d results.DecisionKind, by string, expires time.Time) string {
	e.t.Helper()
	s, err := e.state(turn)
	require.NoError(e.t, err)
	desc, err := e.caller.DescribeWorkflowExecution(e.t.Context(), turn, "")
	require.NoError(e.t, err)
	tok, err := e.signer.SignLink(signedtoken.LinkClaims{
		Turn: turn, Run: desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), Call: call, Decision: d,
		ArgsHash: signedtoken.ArgsHash(card(e.t, s, call).EffectiveArguments()), By: by, Expires: expires,
	})
	require.NoError(e.t, err)
	return tok
}

func postForm(t testing.TB, c *http.Client, base, path string, form url.Values) response {
	t.Helper()
	return doWith(t, c, base, request{method: "POST", path: path, body: form.Encode(), header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
}

func TestLinkConfirmsThenAppliesOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.park("", "one", "ann", 1)
	tok := e.link(id, "d1", results.DecisionApprove, "email:ann@example.com", time.Now().Add(time.Hour))
	path := "/v1/links/" + tok
	browser := browserClient(t)

	// GET shows what the link does and changes nothing, however often a
	// mail scanner fetches it.
	for range 2 {
		r := doWith(t, browser, e.http.URL, request{method: "GET", path: path})
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Contains(t, r.body, "Approve <span class=\"tool\">deploy</span>?")
		require.Contains(t, r.body, "&#34;env&#34;: &#34;staging&#34;")
		require.Contains(t, r.body, "email:ann@example.com")
		require.Equal(t, "no-referrer", r.header.Get("Referrer-Policy"))
		require.Contains(t, r.header.Get("Content-Security-Policy"), "form-action 'self'")
	}
	s, err := e.state(id)
	require.NoError(t, err)
	require.Equal(t, results.StatePendingApproval, card(t, s, "d1").State)

	page := doWith(t, browser, e.http.URL, request{method: "GET", path: path})
	token := csrfOf(t, page.body)

	// A POST that did not come from the page is refused: no token, or a
	// token without the page's cookie.
	r := postForm(t, http.DefaultClient, e.http.URL, path, url.Values{})
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.body, "CSRF token is missing or wrong")
	r = postForm(t, http.DefaultClient, e.http.URL, path, url.Values{"csrf": {token}})
	require.Equal(t, http.StatusForbidden, r.code)
	r = postForm(t, browser, e.http.URL, path, url.Values{"csrf": {"x" + token}})
	require.Equal(t, http.StatusForbidden, r.code)

	r = postForm(t, browser, e.http.URL, path, url.Values{"csrf": {token}})
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, "Approved")
	s = e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	c := card(t, s, "d1")
	require.Len(t, c.Decisions, 1)
	require.Equal(t, "email:ann@example.com", c.Decisions[0].By)

	// Used once; the second use, by POST or GET, says so.
	r = postForm(t, browser, e.http.URL, path, url.Values{"csrf": {token}})
	require.Equal(t, http.StatusConflict, r.code, r.body)
	require.Contains(t, r.body, "This link was already used")
	r = doWith(t, browser, e.http.URL, request{method: "GET", path: path})
	require.Equal(t, http.StatusConflict, r.code)
	require.Contains(t, r.body, "Link already used")
	s, err = e.state(id)
	require.NoError(t, err)
	require.Len(t, card(t, s, "d1").Decisions, 1)
}

func TestLinkRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	browser := browserClient(t)
	get := func(tok string) response {
		return doWith(t, browser, e.http.URL, request{method: "GET", path: "/v1/links/" + tok})
	}

	id := e.park("", "two", "ann", 2)
	expired := e.link(id, "d1", results.DecisionApprove, "ann", time.Now().Add(-time.Minute))
	r := get(expired)
	require.Equal(t, http.StatusGone, r.code)
	require.Contains(t, r.body, "This link has expired")
	r = postForm(t, browser, e.http.URL, "/v1/links/"+expired, url.Values{"csrf": {"x"}})
	require.Equal(t, http.StatusGone, r.code)

	good := e.link(id, "d1", results.DecisionApprove, "ann", time.Now().Add(time.Hour))
	payload, sig, _ := strings.Cut(good, ".")
	// One character of the claims changed, signature kept: tampered.
	mid := len(payload) / 2
	flip := byte('A')
	if payload[mid] == flip {
		flip = 'B'
	}
	forged := payload[:mid] + string(flip) + payload[mid+1:] + "." + sig
	for _, tok := range []string{forged, payload + ".AAAA", "garbage", good[:len(good)-2]} {
		r = get(tok)
		require.Equal(t, http.StatusForbidden, r.code, tok)
		require.Contains(t, r.body, "This link is not valid")
		r = postForm(t, browser, e.http.URL, "/v1/links/"+tok, url.Values{"csrf": {"x"}})
		require.Equal(t, http.StatusForbidden, r.code, tok)
	}

	// The call stopped waiting (someone answered it another way).
	deny := e.link(id, "n1", results.DecisionDeny, "ann", time.Now().Add(time.Hour))
	ops := e.key("ops", readAnswer)
	r = e.do(request{method: "POST", path: "/v1/turns/" + id + "/respond", key: ops, body: `{"call_id":"n1","decision":"approve"}`})
	require.Equal(t, http.StatusOK, r.code, r.body)
	r = get(deny)
	require.Equal(t, http.StatusConflict, r.code)
	require.Contains(t, r.body, "it no longer waits for a decision")

	// The arguments are not the ones the link was made for: refused.
	other := e.park("", "one", "ann", 1)
	desc, err := e.caller.DescribeWorkflowExecution(t.Context(), other, "")
	require.NoError(t, err)
	wrong, err := e.signer.SignLink(signedtoken.LinkClaims{
		Turn: other, Run: desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), Call: "d1", Decision: results.DecisionApprove,
		ArgsHash: signedtoken.ArgsHash([]byte(`{"env":"production"}`)), By: "ann", Expires: time.Now().Add(time.Hour),
	})
	require.NoError(t, err)
	r = get(wrong)
	require.Equal(t, http.StatusConflict, r.code, r.body)
	require.Contains(t, r.body, "changed after this link was made")

	// The turn ended and a new turn took its id, with a call of the same
	// id that deploys to production. The link, made for the old run, must
	// not approve that: it is refused before its arguments are compared.
	reused := e.park("", "one", "ann", 1)
	stale := e.link(reused, "d1", results.DecisionApprove, "ann", time.Now().Add(time.Hour))
	opened := get(stale) // the person opens the link before the change...
	require.Equal(t, http.StatusOK, opened.code)
	require.NoError(t, e.caller.TerminateWorkflow(t.Context(), reused, "", "replaced"))
	e.park(reused, "one-production", "ann", 1)
	r = get(stale)
	require.Equal(t, http.StatusGone, r.code, r.body)
	require.Contains(t, r.body, "made for an earlier turn")
	// ...and presses its button after: refused all the same.
	r = postForm(t, browser, e.http.URL, "/v1/links/"+stale, url.Values{"csrf": {csrfOf(t, opened.body)}})
	require.Equal(t, http.StatusGone, r.code, r.body)
	require.Contains(t, r.body, "made for an earlier turn")
	// A page's CSRF token is bound to its own link.
	fresh := e.link(reused, "d1", results.DecisionApprove, "ann", time.Now().Add(time.Hour))
	r = postForm(t, browser, e.http.URL, "/v1/links/"+fresh, url.Values{"csrf": {csrfOf(t, opened.body)}})
	require.Equal(t, http.StatusForbidden, r.code)
	s, err := e.state(reused)
	require.NoError(t, err)
	require.Equal(t, results.StatePendingApproval, card(t, s, "d1").State)

	// A link from before links named their run, authentic and unexpired.
	unbound := signRaw([]byte(strings.Repeat("s", 32)), []byte(fmt.Sprintf(
		`{"t":%q,"c":"d1","d":"approve","h":%q,"b":"ann","e":%q,"i":"old"}`,
		reused, signedtoken.ArgsHash(card(t, s, "d1").EffectiveArguments()), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))))
	r = get(unbound)
	require.Equal(t, http.StatusGone, r.code, r.body)
	require.Contains(t, r.body, "did not bind links to their turn")
}

// signRaw MACs a payload as the links package does (tollgate link v1), to
// make tokens today's Sign refuses to: the ones older code made.
func signRaw(key, payload []byte) string {
	p := base64.RawURLEncoding.EncodeToString(payload)
	h := hmac.New(sha256.New, key)
	h.Write([]byte("tollgate link v1\x00"))
	h.Write([]byte(p))
	return p + "." + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
