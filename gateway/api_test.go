package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

var (
	readOnly   = []apikey.Scope{apikey.Read}
	readAnswer = []apikey.Scope{apikey.Read, apikey.Respond}
	allScopes  = apikey.Scopes
)

func TestAuthentication(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	reader := e.key("reader", readOnly)

	r := e.do(request{method: "GET", path: "/v1/turns"})
	require.Equal(t, http.StatusUnauthorized, r.code)
	require.Equal(t, `Bearer realm="tollgate"`, r.header.Get("WWW-Authenticate"))
	require.Contains(t, r.error(t), "Authorization: Bearer")
	require.Equal(t, "application/json", r.header.Get("Content-Type"))

	r = e.do(request{method: "GET", path: "/v1/turns", header: map[string]string{"Authorization": "Basic " + reader}})
	require.Equal(t, http.StatusUnauthorized, r.code)
	require.Contains(t, r.header.Get("WWW-Authenticate"), `error="invalid_request"`)

	r = e.do(request{method: "GET", path: "/v1/turns", key: reader + "x"})
	require.Equal(t, http.StatusUnauthorized, r.code)
	require.Contains(t, r.header.Get("WWW-Authenticate"), `error="invalid_token"`)
	require.Equal(t, "the API key is not valid", r.error(t))

	// A valid key without the scope: 403, on every scoped route.
	r = e.do(request{method: "POST", path: "/v1/turns/x/respond", key: reader, body: `{"call_id":"c","decision":"approve"}`})
	require.Equal(t, http.StatusForbidden, r.code)
	require.Equal(t, "the key of reader does not have the respond scope this needs", r.error(t))
	r = e.do(request{method: "POST", path: "/v1/turns", key: reader, body: `{"prompt":"hi","model":"gw:one"}`})
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.header.Get("WWW-Authenticate"), `error="insufficient_scope"`)
	responder := e.key("responder", []apikey.Scope{apikey.Respond})
	r = e.do(request{method: "GET", path: "/v1/turns", key: responder})
	require.Equal(t, http.StatusForbidden, r.code)

	// Methods and unknown routes answer in JSON too.
	r = e.do(request{method: "DELETE", path: "/v1/turns", key: reader})
	require.Equal(t, http.StatusMethodNotAllowed, r.code)
	require.Equal(t, "GET, POST", r.header.Get("Allow"))
	require.Contains(t, r.error(t), "does not take DELETE")
	r = e.do(request{method: "GET", path: "/v1/turns/x/respond", key: reader})
	require.Equal(t, http.StatusMethodNotAllowed, r.code)
	r = e.do(request{method: "GET", path: "/v1/nothing"})
	require.Equal(t, http.StatusNotFound, r.code)
	require.Contains(t, r.error(t), "nothing at /v1/nothing")

	r = e.do(request{method: "GET", path: "/healthz"})
	require.Equal(t, http.StatusOK, r.code)
}

// Every way a response can be refused, with its status code and the
// turn's own sentence, on one parked turn with a deploy and a notify call.
func TestRespondRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	ops := e.key("ops", readAnswer)
	notifier := e.key("notifier", readAnswer, "notify")
	id := e.park("", "two", "ann", 2)
	respond := func(key, body string, hdr map[string]string) response {
		return e.do(request{method: "POST", path: "/v1/turns/" + id + "/respond", key: key, body: body, header: hdr})
	}

	r := e.do(request{method: "POST", path: "/v1/turns/no-such-turn/respond", key: ops, body: `{"call_id":"d1","decision":"approve"}`})
	require.Equal(t, http.StatusNotFound, r.code, r.body)
	require.Equal(t, "there is no turn no-such-turn", r.error(t))

	r = respond(ops, `{"call_id":"nope","decision":"approve"}`, nil)
	require.Equal(t, http.StatusNotFound, r.code, r.body)
	require.Contains(t, r.error(t), `there is no call "nope" in this turn`)

	r = respond(ops, `{"call_id":"d1","decision":"approve","arguments":{"env":"moon"}}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, r.code, r.body)
	require.Contains(t, r.error(t), "the edited arguments for call d1 do not validate")

	r = respond(ops, `{"call_id":"d1","decision":"answer","answer":"\"x\""}`, nil)
	require.Equal(t, http.StatusUnprocessableEntity, r.code, r.body)
	require.Contains(t, r.error(t), "does not fit that wait")

	r = respond(ops, `{"call_id":"d1","decision":"approve","by":"mallory"}`, nil)
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Equal(t, "the body must not set by: decisions are recorded as made by the key's principal (ops)", r.error(t))

	r = respond(ops, `{"call_id":"d1","decision":"approve","sudo":true}`, nil)
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Contains(t, r.error(t), `unknown field "sudo"`)

	r = respond(ops, `{"call_id":"d1","decision":"approve","reason":"`+strings.Repeat("x", 2<<20)+`"}`, nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.code)
	require.Contains(t, r.error(t), "larger than 1048576 bytes")

	r = respond(ops, `{"call_id":"d1"`, nil)
	require.Equal(t, http.StatusBadRequest, r.code)

	r = respond(notifier, `{"call_id":"d1","decision":"approve"}`, nil)
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	require.Equal(t, "the key of notifier may answer only calls of notify; call d1 is a deploy call", r.error(t))
	// A key limited to some tools learns from the turn that there is no
	// such call before the turn is asked to take the response.
	r = respond(notifier, `{"call_id":"nope","decision":"approve"}`, nil)
	require.Equal(t, http.StatusNotFound, r.code, r.body)
	require.Equal(t, fmt.Sprintf("there is no call %q in turn %s", "nope", id), r.error(t))

	// Nothing above changed the turn.
	s, err := e.state(id)
	require.NoError(t, err)
	require.Equal(t, results.StatePendingApproval, card(t, s, "d1").State)
	require.Empty(t, card(t, s, "d1").Decisions)

	// The same Idempotency-Key twice applies once; the second answer is
	// the first's card.
	idem := map[string]string{"Idempotency-Key": "ticket-4711"}
	r = respond(ops, `{"call_id":"d1","decision":"approve"}`, idem)
	require.Equal(t, http.StatusOK, r.code, r.body)
	first := decodeJSON[results.Card](t, r.body)
	require.Len(t, first.Decisions, 1)
	require.Equal(t, "ops", first.Decisions[0].By, "by is the key's principal")
	r = respond(ops, `{"call_id":"d1","decision":"approve"}`, idem)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Equal(t, first.Decisions, decodeJSON[results.Card](t, r.body).Decisions)

	// Without the key, a second approval is a new response: refused.
	r = respond(ops, `{"call_id":"d1","decision":"approve"}`, nil)
	require.Equal(t, http.StatusConflict, r.code, r.body)
	require.Contains(t, r.error(t), "call d1 is")
	require.Contains(t, r.error(t), "not waiting for a response (it got approve from ops)")

	r = respond(ops, `{"call_id":"d1","decision":"approve"}`, map[string]string{"Idempotency-Key": "bad key with spaces"})
	require.Equal(t, http.StatusBadRequest, r.code)

	// A tool-limited key answers its own tool's calls.
	r = respond(notifier, `{"call_id":"n1","decision":"deny","reason":"no pings today"}`, nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	c := decodeJSON[results.Card](t, r.body)
	require.Equal(t, results.StateRefused, c.State)
	require.Equal(t, "notifier", c.Decisions[0].By)

	s = e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	require.Len(t, card(t, s, "d1").Decisions, 1, "applied once")

	// The turn has ended: refused as not waiting.
	r = respond(ops, `{"call_id":"n1","decision":"approve"}`, nil)
	require.Equal(t, http.StatusConflict, r.code, r.body)

	r = e.do(request{method: "GET", path: "/v1/turns/" + id, key: ops})
	require.Equal(t, http.StatusOK, r.code, r.body)
	got := decodeJSON[workflows.State](t, r.body)
	require.Equal(t, workflows.StatusCompleted, got.Status)
	r = e.do(request{method: "GET", path: "/v1/turns/no-such-turn", key: ops})
	require.Equal(t, http.StatusNotFound, r.code, r.body)
}

// With no worker, a response waits RespondTimeout and gets 503 with
// Retry-After; sent again under the same Idempotency-Key once a worker
// runs, it applies once.
func TestRespondWithoutWorker(t *testing.T) {
	e := newEnv(t, envOptions{respondTimeout: 2 * time.Second, noWorker: true})
	ops := e.key("ops", readAnswer)
	id := e.park("", "one", "ann", 0)
	path := "/v1/turns/" + id + "/respond"
	idem := map[string]string{"Idempotency-Key": "retry-me"}

	start := time.Now()
	r := e.do(request{method: "POST", path: path, key: ops, body: `{"call_id":"d1","decision":"approve"}`, header: idem})
	require.Equal(t, http.StatusServiceUnavailable, r.code, r.body)
	require.Equal(t, "5", r.header.Get("Retry-After"))
	require.Contains(t, r.error(t), "no worker took the response within 2s")
	require.Less(t, time.Since(start), 10*time.Second)

	r = e.do(request{method: "GET", path: "/v1/turns/" + id, key: ops})
	require.Equal(t, http.StatusServiceUnavailable, r.code, r.body)
	require.NotEmpty(t, r.header.Get("Retry-After"))

	e.startWorker()
	e.waitState(id, "the call waiting", func(s workflows.State) bool {
		return len(s.Cards) == 1 && s.Cards[0].State.Waiting() || len(s.Cards) == 1 && s.Cards[0].State.Final()
	})
	var c results.Card
	require.Eventually(t, func() bool {
		r = e.do(request{method: "POST", path: path, key: ops, body: `{"call_id":"d1","decision":"approve"}`, header: idem})
		if r.code != http.StatusOK {
			return false
		}
		c = decodeJSON[results.Card](t, r.body)
		return true
	}, waitTimeout, 100*time.Millisecond, "last: %d %s", r.code, r.body)
	require.Len(t, c.Decisions, 1)
	s := e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	require.Len(t, card(t, s, "d1").Decisions, 1)
}

func TestStartTurn(t *testing.T) {
	e := newEnv(t, envOptions{})
	starter := e.key("ci-bot", allScopes)
	r := e.do(request{method: "POST", path: "/v1/turns", key: starter, body: `{"prompt":"deploy","model":"gw:one","tools":["deploy"],"user":"someone-else"}`})
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.error(t), `may start turns only for ci-bot, not for "someone-else"`)

	r = e.do(request{method: "POST", path: "/v1/turns", key: starter, body: `{"prompt":"deploy","model":"gw:one","tool":["deploy"]}`})
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Contains(t, r.error(t), `unknown field "tool"`)

	// An input the workflow would refuse is refused here, and no turn starts.
	bad := e.name + "-no-model"
	r = e.do(request{method: "POST", path: "/v1/turns", key: starter, body: fmt.Sprintf(`{"id":%q,"prompt":"deploy"}`, bad)})
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Contains(t, r.error(t), "the turn names no model")
	_, err := e.caller.DescribeWorkflowExecution(context.Background(), bad, "")
	require.Error(t, err, "a refused input must not start a turn")

	id := e.name + "-started"
	e.turns = append(e.turns, id)
	r = e.do(request{method: "POST", path: "/v1/turns", key: starter, body: fmt.Sprintf(`{"id":%q,"prompt":"deploy","model":"gw:one","tools":["deploy"],"policy":{"response_timeout":"1h"}}`, id)})
	require.Equal(t, http.StatusCreated, r.code, r.body)
	got := decodeJSON[map[string]string](t, r.body)
	require.Equal(t, id, got["id"])
	require.Equal(t, "/v1/turns/"+id, r.header.Get("Location"))

	r = e.do(request{method: "POST", path: "/v1/turns", key: starter, body: fmt.Sprintf(`{"id":%q,"prompt":"deploy","model":"gw:one"}`, id)})
	require.Equal(t, http.StatusConflict, r.code)

	s := e.waitState(id, "waiting", func(s workflows.State) bool { return s.Status == workflows.StatusWaiting })
	require.Equal(t, "deploy", s.Cards[0].Tool)
	r = e.do(request{method: "POST", path: "/v1/turns/" + id + "/respond", key: starter, body: `{"call_id":"d1","decision":"approve"}`})
	require.Equal(t, http.StatusOK, r.code, r.body)
	s = e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	require.Equal(t, "ci-bot", s.Cards[0].Decisions[0].By)

	// Without an id, the gateway names the turn.
	r = e.do(request{method: "POST", path: "/v1/turns", key: starter, body: `{"prompt":"deploy","model":"gw:one","tools":["deploy"]}`})
	require.Equal(t, http.StatusCreated, r.code, r.body)
	e.turns = append(e.turns, decodeJSON[map[string]string](t, r.body)["id"])
	require.True(t, strings.HasPrefix(decodeJSON[map[string]string](t, r.body)["id"], "tollgate-"))
}

// GET /v1/turns lists through visibility and asks each waiting turn for
// its cards.
func TestListTurns(t *testing.T) {
	e := newEnv(t, envOptions{})
	ops := e.key("ops", readAnswer)
	user := e.name + "-user"
	older := e.park("", "one", user, 1)
	newer := e.park("", "two", user, 2)
	done := e.park("", "one", user, 1)
	r := e.do(request{method: "POST", path: "/v1/turns/" + done + "/respond", key: ops, body: `{"call_id":"d1","decision":"approve"}`})
	require.Equal(t, http.StatusOK, r.code, r.body)
	e.waitListed(older, workflows.StatusWaiting)
	e.waitListed(newer, workflows.StatusWaiting)
	e.waitListed(done, workflows.StatusCompleted)

	r = e.do(request{method: "GET", path: "/v1/turns?status=waiting&user=" + user, key: ops})
	require.Equal(t, http.StatusOK, r.code, r.body)
	list := decodeJSON[gateway.TurnList](t, r.body)
	require.Len(t, list.Turns, 2)
	require.Equal(t, newer, list.Turns[0].ID, "newest first")
	require.Equal(t, older, list.Turns[1].ID)
	n := list.Turns[0]
	require.Equal(t, workflows.StatusWaiting, n.Status)
	require.Equal(t, user, n.User)
	require.Equal(t, "Ship version 1.2.3 to staging", n.Summary)
	require.ElementsMatch(t, []string{"d1", "n1"}, n.WaitingCalls)
	require.Equal(t, []string{"deploy", "notify"}, n.WaitingTools)
	require.Len(t, n.Waiting, 2)
	require.Equal(t, "d1", n.Waiting[0].CallID)
	require.Equal(t, results.StatePendingApproval, n.Waiting[0].State)
	require.JSONEq(t, `{"env":"staging","version":"1.2.3"}`, string(n.Waiting[0].Arguments))

	r = e.do(request{method: "GET", path: "/v1/turns?user=" + user, key: ops})
	require.Equal(t, http.StatusOK, r.code, r.body)
	list = decodeJSON[gateway.TurnList](t, r.body)
	require.Len(t, list.Turns, 3)
	require.Equal(t, done, list.Turns[0].ID)
	require.Equal(t, workflows.StatusCompleted, list.Turns[0].Status)
	require.Empty(t, list.Turns[0].Waiting)

	r = e.do(request{method: "GET", path: "/v1/turns?user=" + user + "&limit=1", key: ops})
	require.Len(t, decodeJSON[gateway.TurnList](t, r.body).Turns, 1)

	for q, want := range map[string]string{
		"status=sleeping":     `status "sleeping" is not one of`,
		"limit=0":             "limit must be a whole number between 1 and 500",
		"limit=501":           "limit must be between 1 and 500",
		"limit=ten":           "limit must be a whole number",
		"user=a'+OR+'1'%3D'1": "user must not contain quotes",
	} {
		r = e.do(request{method: "GET", path: "/v1/turns?" + q, key: ops})
		require.Equal(t, http.StatusBadRequest, r.code, q)
		require.Contains(t, r.error(t), want, q)
	}
}

func TestDevModeIsLoopbackOnly(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.0.2.10:8080", "[::]:8080", "example.com:8080"} {
		_, err := gateway.New(gateway.Options{Temporal: e.caller, Dev: true, Addr: addr})
		require.Error(t, err, addr)
		require.Contains(t, err.Error(), "loopback", addr)
	}
	for _, addr := range []string{"127.0.0.1:8080", "[::1]:8080", "localhost:8080"} {
		_, err := gateway.New(gateway.Options{Temporal: e.caller, Dev: true, Addr: addr})
		require.NoError(t, err, addr)
	}

	dev, err := gateway.New(gateway.Options{Temporal: e.caller, TaskQueue: e.tq, Dev: true, Addr: "127.0.0.1:8080", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	// Anonymous from loopback acts as dev...
	req := httptest.NewRequest("POST", "/v1/turns", strings.NewReader(`{"id":"`+e.name+`-dev","prompt":"hi","model":"gw:one"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Host = "127.0.0.1:8080"
	req.RemoteAddr = "127.0.0.1:5555"
	w := httptest.NewRecorder()
	dev.ServeHTTP(w, req)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	e.turns = append(e.turns, e.name+"-dev")
	// ...from anywhere else it needs a key.
	req = httptest.NewRequest("GET", "/v1/turns", nil)
	req.Host = "127.0.0.1:8080"
	req.RemoteAddr = "192.0.2.1:5555"
	w = httptest.NewRecorder()
	dev.ServeHTTP(w, req)
	require.Equal(t, http.StatusUnauthorized, w.Code)

	// The inbox needs no login there, and says why.
	req = httptest.NewRequest("GET", "/inbox", nil)
	req.Host = "127.0.0.1:8080"
	req.RemoteAddr = "127.0.0.1:5555"
	w = httptest.NewRecorder()
	dev.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code)
	require.Contains(t, w.Body.String(), "Dev mode: anyone on this machine acts as <code>dev</code>")
	req.RemoteAddr = "192.0.2.1:5555"
	w = httptest.NewRecorder()
	dev.ServeHTTP(w, req)
	require.Contains(t, w.Body.String(), "Sign in")

	// Serve refuses a listener that is not on loopback.
	require.Error(t, gateway.CheckLoopback("10.0.0.1:80"))
}
