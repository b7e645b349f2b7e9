package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Turn ids and the runs they name: a caller must not be able
// to choose the id of a turn that exists or existed, and what was made
// for one run (a link) does nothing for another run under the same id.

var jsonBody = map[string]string{"Content-Type": "application/json"}

// The scopes are spelled out so these tests run (and fail) on a gateway
// that does not know them.
var (
	scopeRerun   = apikey.Scope("rerun")
	scopeHistory = apikey.Scope("history")
)

// Item 3: a link is bound to the run it was made for. The turn closes,
// its id is taken again (here by an operator's Go API start), and the
// old, used link is pressed: it must not decide anything for the new
// run, though the new run's call has the same id and the same arguments.
func TestUsedLinkDoesNothingForARecreatedTurn(t *testing.T) {
	e := newEnv(t, envOptions{})
	browser := browserClient(t)
	id := e.park("", "one", "ann", 1)
	tok := e.link(id, "d1", results.DecisionApprove, "ann", time.Now().Add(time.Hour))
	path := "/v1/links/" + tok
	page := doWith(t, browser, e.http.URL, request{method: "GET", path: path})
	require.Equal(t, http.StatusOK, page.code, page.body)
	csrf := csrfOf(t, page.body)
	r := postForm(t, browser, e.http.URL, path, url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusOK, r.code, r.body)
	e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })

	e.park(id, "one", "ann", 1)
	r = doWith(t, browser, e.http.URL, request{method: "GET", path: path})
	require.Equal(t, http.StatusGone, r.code, r.body)
	require.Contains(t, r.body, "made for an earlier turn")
	r = postForm(t, browser, e.http.URL, path, url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusGone, r.code, r.body)
	require.Contains(t, r.body, "made for an earlier turn")
	s, err := e.state(id)
	require.NoError(t, err)
	require.Equal(t, results.StatePendingApproval, card(t, s, "d1").State, "the old link decided nothing for the new run")
}

// Item 4: ids chosen through the gateway stay out of the names Tollgate
// makes itself (a session's `<session>/turn-<n>` children, webhook
// deliveries `<run>/<type>/<key>`, the gateway's own `tollgate-<hex>`),
// and never name an execution that exists or existed.
func TestStartTurnCannotTakeAnExistingOrReservedID(t *testing.T) {
	e := newEnv(t, envOptions{})
	starter := e.key("squatter", []apikey.Scope{apikey.Read, apikey.Start, apikey.Respond})
	start := func(id string) response {
		return e.do(request{method: "POST", path: "/v1/turns", key: starter, header: jsonBody,
			body: fmt.Sprintf(`{"id":%q,"prompt":"deploy","model":"gw:one","tools":["deploy"]}`, id)})
	}
	noTurn := func(id string) {
		t.Helper()
		_, err := e.caller.DescribeWorkflowExecution(context.Background(), id, "")
		require.Error(t, err, "a refused id must not start a turn: %s", id)
	}

	session := e.name + "-session"
	for id, want := range map[string]string{
		session + "/turn-2":              "must not contain /",
		"run/call.waiting/d1/1":          "must not contain /",
		"tollgate-0123456789ab":          "tollgate- is reserved",
		"Tollgate-0123456789ab":          "tollgate- is reserved",
		"tollgate-" + e.name + "-chosen": "tollgate- is reserved",
	} {
		r := start(id)
		require.Equal(t, http.StatusBadRequest, r.code, "%s: %s", id, r.body)
		require.Contains(t, r.error(t), want, id)
		noTurn(id)
	}

	// A closed turn's id cannot be taken again: not by a caller who saw it
	// in a listing, nor by anyone else.
	closed := e.name + "-closed"
	e.turns = append(e.turns, closed)
	r := start(closed)
	require.Equal(t, http.StatusCreated, r.code, r.body)
	first := decodeJSON[map[string]string](t, r.body)["run_id"]
	e.waitState(closed, "waiting", func(s workflows.State) bool { return s.Status == workflows.StatusWaiting })
	r = start(closed)
	require.Equal(t, http.StatusConflict, r.code, r.body)
	require.Equal(t, fmt.Sprintf("a turn with id %s is already running; choose another id", closed), r.error(t))
	r = e.do(request{method: "POST", path: "/v1/turns/" + closed + "/respond", key: starter, header: jsonBody, body: `{"call_id":"d1","decision":"approve"}`})
	require.Equal(t, http.StatusOK, r.code, r.body)
	e.waitState(closed, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	r = start(closed)
	require.Equal(t, http.StatusConflict, r.code, r.body)
	require.Equal(t, fmt.Sprintf("a turn with id %s existed before; an id names one turn only, so choose another", closed), r.error(t))
	d, err := e.caller.DescribeWorkflowExecution(context.Background(), closed, "")
	require.NoError(t, err)
	require.Equal(t, first, d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "the closed turn is still the only one")

	// A terminated turn's id neither.
	gone := e.park("", "one", "ann", 1)
	require.NoError(t, e.caller.TerminateWorkflow(context.Background(), gone, "", "test"))
	r = start(gone)
	require.Equal(t, http.StatusConflict, r.code, r.body)
}

// Item 4's exception: a key with the rerun scope may re-use the id of a
// closed turn, deliberately (`"rerun": true`), and only a closed one. The
// old run's links stay dead for the new run.
func TestRerunScopeTakesAClosedIDAgain(t *testing.T) {
	e := newEnv(t, envOptions{})
	plain := e.key("plain", []apikey.Scope{apikey.Start, apikey.Respond})
	rerunner := e.key("rerunner", []apikey.Scope{apikey.Start, scopeRerun})
	id := e.name + "-again"
	e.turns = append(e.turns, id)
	body := fmt.Sprintf(`{"id":%q,"rerun":true,"prompt":"deploy","model":"gw:one","tools":["deploy"]}`, id)

	r := e.do(request{method: "POST", path: "/v1/turns", key: plain, header: jsonBody, body: body})
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	require.Equal(t, "the key of plain does not have the rerun scope that re-using a closed turn's id needs", r.error(t))

	// rerun on an id that never existed is an ordinary start.
	r = e.do(request{method: "POST", path: "/v1/turns", key: rerunner, header: jsonBody, body: body})
	require.Equal(t, http.StatusCreated, r.code, r.body)
	e.waitState(id, "waiting", func(s workflows.State) bool { return s.Status == workflows.StatusWaiting })
	tok := e.link(id, "d1", results.DecisionApprove, "ann", time.Now().Add(time.Hour))
	r = e.do(request{method: "POST", path: "/v1/turns", key: rerunner, header: jsonBody, body: body})
	require.Equal(t, http.StatusConflict, r.code, "rerun never replaces a running turn: %s", r.body)
	require.Contains(t, r.error(t), "is already running")

	r = e.do(request{method: "POST", path: "/v1/turns/" + id + "/respond", key: plain, header: jsonBody, body: `{"call_id":"d1","decision":"deny"}`})
	require.Equal(t, http.StatusOK, r.code, r.body)
	e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	r = e.do(request{method: "POST", path: "/v1/turns", key: rerunner, header: jsonBody, body: body})
	require.Equal(t, http.StatusCreated, r.code, r.body)
	e.waitState(id, "waiting again", func(s workflows.State) bool { return s.Status == workflows.StatusWaiting })

	// The link made for the first run (never used) is dead for the second.
	r = doWith(t, browserClient(t), e.http.URL, request{method: "GET", path: "/v1/links/" + tok})
	require.Equal(t, http.StatusGone, r.code, r.body)
	require.Contains(t, r.body, "made for an earlier turn")

	// rerun does not open the reserved names either.
	r = e.do(request{method: "POST", path: "/v1/turns", key: rerunner, header: jsonBody, body: `{"id":"s/turn-1","rerun":true,"prompt":"deploy","model":"gw:one"}`})
	require.Equal(t, http.StatusBadRequest, r.code, r.body)
}

// Head, messages and workspace load a stored
// conversation or workspace; only a key with the history scope sets them.
func TestHistoryFieldsNeedTheHistoryScope(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	starter := e.key("starter", []apikey.Scope{apikey.Start})
	historian := e.key("historian", []apikey.Scope{apikey.Start, scopeHistory})
	for _, extra := range []string{
		`"head":"sha256:0123"`,
		`"messages":[{"role":"user","parts":[{"type":"text","text":"earlier"}]}]`,
		`"workspace":"tollgate-ws-1"`,
	} {
		body := fmt.Sprintf(`{"prompt":"go on","model":"gw:one",%s}`, extra)
		r := e.do(request{method: "POST", path: "/v1/turns", key: starter, header: jsonBody, body: body})
		require.Equal(t, http.StatusForbidden, r.code, "%s: %s", extra, r.body)
		require.Equal(t, "the key of starter does not have the history scope that setting head, messages or workspace needs: they load a stored conversation or workspace", r.error(t))
	}
	id := e.name + "-continued"
	e.turns = append(e.turns, id)
	r := e.do(request{method: "POST", path: "/v1/turns", key: historian, header: jsonBody, body: fmt.Sprintf(`{"id":%q,"prompt":"go on","model":"gw:one","workspace":"tollgate-ws-1"}`, id)})
	require.Equal(t, http.StatusCreated, r.code, r.body)
}

// keyFor adds a key limited to users, written as the keys file holds it.
func (e *env) keyFor(principal string, scopes []apikey.Scope, users ...string) string {
	e.t.Helper()
	k, entry, err := apikey.New(principal, scopes, nil)
	require.NoError(e.t, err)
	file, err := json.Marshal(map[string]any{"keys": []any{map[string]any{
		"principal": principal, "sha256": entry.SHA256, "scopes": scopes, "users": users,
	}}})
	require.NoError(e.t, err)
	parsed, err := apikey.Parse(file)
	require.NoError(e.t, err)
	require.Len(e.t, parsed, 1)
	require.NoError(e.t, e.keys.Add(parsed[0]))
	return k
}

// A key limited to named users reads, answers and
// starts only their turns; another user's turn is not there for it (404,
// the answer for a turn that does not exist, so it learns nothing).
func TestKeyLimitedToUsers(t *testing.T) {
	e := newEnv(t, envOptions{})
	ann, bob := e.name+"-ann", e.name+"-bob"
	desk := e.keyFor("desk", []apikey.Scope{apikey.Read, apikey.Respond, apikey.Start}, ann)
	annTurn := e.park("", "one", ann, 1)
	bobTurn := e.park("", "one", bob, 1)
	e.waitListed(annTurn, workflows.StatusWaiting)
	e.waitListed(bobTurn, workflows.StatusWaiting)

	r := e.do(request{method: "GET", path: "/v1/turns?status=waiting", key: desk})
	require.Equal(t, http.StatusOK, r.code, r.body)
	listed := decodeJSON[gateway.TurnList](t, r.body).Turns
	require.NotEmpty(t, listed)
	for _, turn := range listed {
		require.Equal(t, ann, turn.User, "a key limited to %s lists only their turns", ann)
	}
	r = e.do(request{method: "GET", path: "/v1/turns?user=" + bob, key: desk})
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Empty(t, decodeJSON[gateway.TurnList](t, r.body).Turns)

	r = e.do(request{method: "GET", path: "/v1/turns/" + annTurn, key: desk})
	require.Equal(t, http.StatusOK, r.code, r.body)
	r = e.do(request{method: "GET", path: "/v1/turns/" + bobTurn, key: desk})
	require.Equal(t, http.StatusNotFound, r.code, r.body)
	require.Equal(t, "there is no turn "+bobTurn, r.error(t))

	r = e.do(request{method: "POST", path: "/v1/turns/" + bobTurn + "/respond", key: desk, header: jsonBody, body: `{"call_id":"d1","decision":"approve"}`})
	require.Equal(t, http.StatusNotFound, r.code, r.body)
	require.Equal(t, "there is no turn "+bobTurn, r.error(t))
	s, err := e.state(bobTurn)
	require.NoError(t, err)
	require.Equal(t, results.StatePendingApproval, card(t, s, "d1").State)

	// The inbox shows and answers ann's calls only.
	browser := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(browser, desk).code)
	page := e.inbox(browser)
	require.Equal(t, http.StatusOK, page.code)
	require.Contains(t, page.body, annTurn)
	require.NotContains(t, page.body, bobTurn)
	r = postForm(t, browser, e.http.URL, "/inbox/respond", url.Values{"csrf": {csrfOf(t, page.body)}, "turn": {bobTurn}, "call": {"d1"}, "action": {"approve"}})
	require.Equal(t, http.StatusNotFound, r.code, r.body)
	s, err = e.state(bobTurn)
	require.NoError(t, err)
	require.Equal(t, results.StatePendingApproval, card(t, s, "d1").State)
	r = postForm(t, browser, e.http.URL, "/inbox/respond", url.Values{"csrf": {csrfOf(t, page.body)}, "turn": {annTurn}, "call": {"d1"}, "action": {"approve"}})
	require.Equal(t, http.StatusSeeOther, r.code, r.body)
	e.waitState(annTurn, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })

	// It starts turns for its users, and for nobody else.
	for _, user := range []string{bob, ""} {
		r = e.do(request{method: "POST", path: "/v1/turns", key: desk, header: jsonBody, body: fmt.Sprintf(`{"prompt":"deploy","model":"gw:one","user":%q}`, user)})
		require.Equal(t, http.StatusForbidden, r.code, r.body)
		require.Contains(t, r.error(t), "may start turns only for "+ann)
	}
	r = e.do(request{method: "POST", path: "/v1/turns", key: desk, header: jsonBody, body: fmt.Sprintf(`{"prompt":"deploy","model":"gw:one","user":%q}`, ann)})
	require.Equal(t, http.StatusCreated, r.code, r.body)
	e.turns = append(e.turns, decodeJSON[map[string]string](t, r.body)["id"])
}
