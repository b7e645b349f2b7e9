package gateway_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// A one-click link made before a parked turn continued as new still
// applies after it, once; the cards route pages through the turn; and a
// caller cannot hand a new turn a continued run's state.
func TestLinkMadeBeforeTheTurnContinuedAsNew(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := fmt.Sprintf("%s-long-%d", e.name, seq.Add(1))
	_, err := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}.Start(t.Context(), id, workflows.Input{
		Prompt: "deploy", Model: "gw:one", Tools: []string{"deploy"}, User: "ann",
		// The run continues as new from 200 events on.
		Policy: workflows.Policy{MaxHistoryEvents: 500},
	})
	require.NoError(t, err)
	e.turns = append(e.turns, id)
	e.waitState(id, "d1 waiting", func(s workflows.State) bool {
		c, ok := findCard(s, "d1")
		return ok && c.State == results.StatePendingApproval
	})
	tok := e.link(id, "d1", results.DecisionApprove, "email:ann@example.com", time.Now().Add(time.Hour))

	for i := range 150 {
		require.NoError(t, e.caller.SignalWorkflow(t.Context(), id, "", workflows.RespondName,
			workflows.Response{CallID: fmt.Sprintf("nope-%d", i), Decision: results.DecisionApprove}))
	}
	e.waitState(id, "a second run", func(s workflows.State) bool { return s.Runs >= 2 && s.InvalidSignals == 150 })

	reader := e.key("reader", readOnly)
	r := e.do(request{method: "GET", path: "/v1/turns/" + id + "/cards?limit=10", key: reader})
	require.Equal(t, http.StatusOK, r.code, r.body)
	page := decodeJSON[workflows.Cards](t, r.body)
	require.Equal(t, 1, page.Total)
	// The earlier runs hold no card: d1 waited through them.
	require.NotEmpty(t, page.Runs)
	for _, run := range page.Runs {
		require.Zero(t, run.Count)
	}
	require.Equal(t, "d1", page.Cards[0].CallID)
	r = e.do(request{method: "GET", path: "/v1/turns/" + id + "/cards?offset=-1", key: reader})
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Contains(t, r.error(t), "offset must be a whole number")

	browser := browserClient(t)
	path := "/v1/links/" + tok
	form := doWith(t, browser, e.http.URL, request{method: "GET", path: path})
	require.Equal(t, http.StatusOK, form.code, form.body)
	r = postForm(t, browser, e.http.URL, path, url.Values{"csrf": {csrfOf(t, form.body)}})
	require.Equal(t, http.StatusOK, r.code, r.body)
	s := e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	c, _ := findCard(s, "d1")
	require.Len(t, c.Decisions, 1)
	require.Equal(t, "email:ann@example.com", c.Decisions[0].By)

	starter := e.key("ci-bot", allScopes)
	r = e.do(request{method: "POST", path: "/v1/turns", key: starter,
		body: `{"prompt":"deploy","model":"gw:one","tools":["deploy"],"continued":{"runs":[{"run_id":"x","first":0,"count":0}],"step":1}}`})
	require.Equal(t, http.StatusBadRequest, r.code)
	require.Contains(t, r.error(t), "continued is what a turn hands its next run")
}

func findCard(s workflows.State, id string) (results.Card, bool) {
	for _, c := range s.Cards {
		if c.CallID == id {
			return c, true
		}
	}
	return results.Card{}, false
}
