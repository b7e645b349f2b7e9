package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/grants"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// An approve with remember=user through the gateway lets the user's next
// turn make the same call without asking, its card naming the grant; a
// key limited to the user lists and revokes it, a key of another user
// does neither, and once revoked the call asks again.
func TestGrantsThroughTheGateway(t *testing.T) {
	e := newEnv(t, envOptions{})
	ann, bob := e.name+"-ann", e.name+"-bob"
	desk := e.keyFor("desk", []apikey.Scope{apikey.Read, apikey.Respond, apikey.Start}, ann)
	other := e.keyFor("other", []apikey.Scope{apikey.Read, apikey.Respond}, bob)

	first := e.park("", "one", ann, 1)
	r := e.do(request{method: "POST", path: "/v1/turns/" + first + "/respond", key: desk, header: jsonBody, body: `{"call_id":"d1","decision":"approve","remember":"forever"}`})
	require.Equal(t, http.StatusUnprocessableEntity, r.code, r.body)
	require.Equal(t, `remember "forever" is not one of session, user`, r.error(t))
	r = e.do(request{method: "POST", path: "/v1/turns/" + first + "/respond", key: desk, header: jsonBody, body: `{"call_id":"d1","decision":"approve","remember":"user"}`})
	require.Equal(t, http.StatusOK, r.code, r.body)
	s := e.waitState(first, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	d := card(t, s, "d1").Decisions[0]
	require.Equal(t, "user", d.Remember)
	require.NotEmpty(t, d.Grant, "the grant was stored: %+v", d)

	second := e.start(ann, "one")
	s = e.waitState(second, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	c := card(t, s, "d1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Empty(t, c.Decisions, "nobody was asked")
	require.Equal(t, d.Grant, c.Approval.Grant.ID)
	require.Equal(t, "desk", c.Approval.Grant.By)
	r = e.do(request{method: "GET", path: "/v1/turns/" + second, key: desk})
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, `"grant":{"id":"`+d.Grant+`"`)

	r = e.do(request{method: "GET", path: "/v1/grants", key: desk})
	require.Equal(t, http.StatusOK, r.code, r.body)
	list := decodeJSON[gateway.GrantList](t, r.body)
	require.Equal(t, ann, list.User)
	require.Len(t, list.Grants, 1)
	require.Equal(t, d.Grant, list.Grants[0].ID)
	require.Equal(t, "deploy", list.Grants[0].Tool)

	r = e.do(request{method: "GET", path: "/v1/grants?user=" + ann, key: other})
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	r = e.do(request{method: "DELETE", path: "/v1/grants/" + d.Grant + "?user=" + ann, key: other})
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	r = e.do(request{method: "DELETE", path: "/v1/grants/" + d.Grant, key: other})
	require.Equal(t, http.StatusNotFound, r.code, "bob has no such grant: %s", r.body)

	r = e.do(request{method: "DELETE", path: "/v1/grants/" + d.Grant, key: desk})
	require.Equal(t, http.StatusOK, r.code, r.body)
	r = e.do(request{method: "GET", path: "/v1/grants", key: desk})
	require.Empty(t, decodeJSON[gateway.GrantList](t, r.body).Grants)

	e.park("", "one", ann, 1)
}

// start starts a turn of script for user and returns its id.
func (e *env) start(user, script string) string {
	e.t.Helper()
	id := fmt.Sprintf("%s-turn-%d", e.name, seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}.Start(ctx, id, workflows.Input{
		Prompt: "Ship it", Model: "gw:" + script, Tools: []string{"deploy", "notify", "pick", "write_file"}, User: user,
	})
	require.NoError(e.t, err)
	e.turns = append(e.turns, id)
	return id
}

// The inbox offers to remember an approval for the turn's user, and
// approving with it stores a grant.
func TestInboxApprovesAndRemembers(t *testing.T) {
	e := newEnv(t, envOptions{})
	ann := e.name + "-ann"
	desk := e.keyFor("desk", []apikey.Scope{apikey.Read, apikey.Respond}, ann)
	id := e.park("", "one", ann, 1)
	e.waitListed(id, workflows.StatusWaiting)

	page, g := e.approveRemembering(desk, id, "user")
	require.Contains(t, page, `<option value="user">and remember for `+ann+`</option>`)
	require.NotContains(t, page, `<option value="session">`, "the turn is in no session")
	require.Empty(t, g.Session)
}

// approveRemembering signs in to the inbox with key, approves call d1 of
// turn id there with the remember option given, and waits for the turn to
// complete. It returns the inbox page it answered from and the grant the
// approval stored, which the call's decision names.
func (e *env) approveRemembering(key, id, remember string) (string, grants.Grant) {
	e.t.Helper()
	browser := browserClient(e.t)
	require.Equal(e.t, http.StatusSeeOther, e.login(browser, key).code)
	page := e.inbox(browser)
	r := postForm(e.t, browser, e.http.URL, "/inbox/respond", url.Values{"csrf": {csrfOf(e.t, page.body)}, "turn": {id}, "call": {"d1"}, "action": {"approve"}, "remember": {remember}})
	require.Equal(e.t, http.StatusSeeOther, r.code, r.body)
	s := e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	d := card(e.t, s, "d1").Decisions[0]
	require.Equal(e.t, remember, d.Remember)
	require.NotEmpty(e.t, d.Grant)
	r = e.do(request{method: "GET", path: "/v1/grants", key: key})
	g := decodeJSON[gateway.GrantList](e.t, r.body).Grants[0]
	require.Equal(e.t, d.Grant, g.ID)
	return page.body, g
}

// A turn of a session: the inbox offers to remember an approval for the
// rest of the session too, and approving with it stores a session grant.
func TestInboxRemembersForTheSession(t *testing.T) {
	e := newEnv(t, envOptions{})
	ann := e.name + "-ann"
	desk := e.keyFor("desk", []apikey.Scope{apikey.Read, apikey.Respond}, ann)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}
	sessionID := e.name + "-session"
	_, err := c.StartSession(ctx, sessionID, workflows.SessionInput{Turn: workflows.Input{
		Model: "gw:one", Tools: []string{"deploy", "notify", "pick", "write_file"}, User: ann,
	}})
	require.NoError(t, err)
	sent, err := c.Send(ctx, sessionID, workflows.Send{Text: "Ship version 1.2.3 to staging\nand tell #ops.", By: ann})
	require.NoError(t, err)
	id := sent.TurnID
	e.turns = append(e.turns, id)
	e.waitState(id, "d1 waiting", func(s workflows.State) bool { return len(s.Cards) > 0 && s.Cards[0].State.Waiting() })
	e.waitListed(id, workflows.StatusWaiting)

	page, g := e.approveRemembering(desk, id, "session")
	require.Contains(t, page, `<option value="session">and remember for this session</option><option value="user">and remember for `+ann+`</option>`)
	require.Equal(t, sessionID, g.Session)
}
