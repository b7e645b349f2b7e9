package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/workflows"
)

func init() {
	scripts["agboss"] = tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("c1", "agent_agwriter", map[string]string{"task": "write notes.md"})),
		tollgatetest.Reply("The writer wrote it."),
	)
	scripts["agwriter"] = tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("w1", "write_file", map[string]string{"path": "notes.md", "content": "hi"})),
		tollgatetest.Reply("Wrote notes.md."),
	)
	scripts["agdesk"] = tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("d1", "agent_agboss", map[string]string{"task": "get my notes written"})),
		tollgatetest.Reply("Your notes are written."),
	)
	scripts["agtriage"] = tollgatetest.NewModel(
		tollgatetest.Reply("Over to billing.", tollgatetest.Call("h1", "transfer_to_agbilling", map[string]string{"message": "refund"})),
	)
	scripts["agbilling"] = tollgatetest.NewModel(
		tollgatetest.Reply("unused"),
		tollgatetest.Reply("Billing here: refunded."),
	)
}

var gatewayAgents = []workflows.Agent{
	{Name: "agboss", Model: "gw:agboss", Tools: []string{"agent:agwriter"}},
	{Name: "agwriter", Description: "Writes files.", Model: "gw:agwriter", Tools: []string{"write_file"}, Policy: workflows.Policy{Approval: map[string]string{"write_file": "always"}}},
	{Name: "agtriage", Model: "gw:agtriage", Handoffs: []string{"agbilling"}},
	{Name: "agdesk", Model: "gw:agdesk", Tools: []string{"agent:agboss"}},
	{Name: "agbilling", Model: "gw:agbilling"},
}

// The gateway lists the worker's agents, starts a turn by agent, shows
// a child agent's approval on the parent and answers it through the
// parent's respond route.
func TestGatewayRunsAgentsAndAnswersAChildThroughTheParent(t *testing.T) {
	e := newEnv(t, envOptions{agents: gatewayAgents})
	ann := e.key("ann", []apikey.Scope{apikey.Read, apikey.Start, apikey.Respond})

	got := e.do(request{method: http.MethodGet, path: "/v1/agents", key: ann})
	require.Equal(t, http.StatusOK, got.code, got.body)
	listed := decodeJSON[struct {
		Agents []workflows.AgentInfo `json:"agents"`
	}](t, got.body)
	require.Len(t, listed.Agents, 5)
	require.Equal(t, "agbilling", listed.Agents[0].Name)
	require.NotContains(t, got.body, "instructions")

	id := e.startAgent(ann, `{"agent":"agboss","prompt":"write my notes"}`)
	e.turns = append(e.turns, id, id+"/c1")
	s := e.waitState(id, "the child's approval", func(s workflows.State) bool {
		return s.Status == workflows.StatusWaiting && len(s.Cards) == 1 && s.Cards[0].Agent != nil && len(s.Cards[0].Agent.Waiting) == 1
	})
	require.Equal(t, "c1/w1", s.Cards[0].Agent.Waiting[0].CallID)
	e.waitListed(id, workflows.StatusWaiting)

	answered := e.do(request{method: http.MethodPost, path: "/v1/turns/" + id + "/respond", key: ann, body: `{"call_id":"c1/w1","decision":"approve"}`})
	require.Equal(t, http.StatusOK, answered.code, answered.body)
	require.Equal(t, "w1", decodeJSON[results.Card](t, answered.body).CallID)
	res := e.result(id)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "The writer wrote it.", res.Text)
}

// A bare turn that transfers ends transferred; one call continues it
// with the target agent.
func TestGatewayContinuesATransferredTurnWithItsTarget(t *testing.T) {
	e := newEnv(t, envOptions{agents: gatewayAgents})
	ann := e.key("ann", []apikey.Scope{apikey.Read, apikey.Start})
	bob := e.key("bob", []apikey.Scope{apikey.Read, apikey.Start})

	id := e.startAgent(ann, `{"agent":"agtriage","prompt":"refund please"}`)
	e.turns = append(e.turns, id)
	require.Equal(t, workflows.StatusTransferred, e.result(id).Status)

	other := e.do(request{method: http.MethodPost, path: "/v1/turns/" + id + "/continue", key: bob, body: `{}`})
	require.Equal(t, http.StatusForbidden, other.code, other.body)

	next := e.do(request{method: http.MethodPost, path: "/v1/turns/" + id + "/continue", key: ann, body: `{}`})
	require.Equal(t, http.StatusCreated, next.code, next.body)
	nextID := decodeJSON[map[string]string](t, next.body)["id"]
	e.turns = append(e.turns, nextID)
	res := e.result(nextID)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Billing here: refunded.", res.Text)

	again := e.do(request{method: http.MethodPost, path: "/v1/turns/" + nextID + "/continue", key: ann, body: `{}`})
	require.Equal(t, http.StatusConflict, again.code, again.body)
	require.Contains(t, again.error(t), "did not end with a transfer")
}

func (e *env) result(id string) workflows.Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := tollgate.Client{Temporal: e.caller}.Result(ctx, id)
	require.NoError(e.t, err, fmt.Sprintf("result of %s", id))
	return res
}

// A called agent's approval is listed on the top turn, shown once in the
// inbox with the chain of agents, and answered there.
func TestInboxShowsAChildsWaitUnderTheTopTurn(t *testing.T) {
	e := newEnv(t, envOptions{agents: gatewayAgents})
	ops := e.key("ops", []apikey.Scope{apikey.Read, apikey.Start, apikey.Respond})
	id := e.startAgent(ops, `{"agent":"agboss","prompt":"write my notes"}`)
	child := id + "/c1"
	e.turns = append(e.turns, id, child)
	e.waitListed(id, workflows.StatusWaiting)
	e.waitListed(child, workflows.StatusWaiting)

	listed := e.do(request{method: http.MethodGet, path: "/v1/turns?status=waiting", key: ops})
	require.Equal(t, http.StatusOK, listed.code, listed.body)
	var top gatewayTurn
	for _, tr := range decodeJSON[struct {
		Turns []gatewayTurn `json:"turns"`
	}](t, listed.body).Turns {
		if tr.ID == id {
			top = tr
		}
	}
	require.Len(t, top.Waiting, 1)
	require.Equal(t, "c1/w1", top.Waiting[0].CallID)
	require.Equal(t, []string{"agboss", "agwriter"}, top.Agents[0].Chain)

	browser := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(browser, ops).code)
	page := e.inbox(browser)
	require.Equal(t, http.StatusOK, page.code)
	require.Equal(t, 1, strings.Count(page.body, `data-call="c1/w1"`), "the child's call shows once, under the top turn")
	require.NotContains(t, page.body, `data-turn="`+child+`"`)
	require.Contains(t, page.body, "agents agboss → agwriter")

	r := postForm(t, browser, e.http.URL, "/inbox/respond", url.Values{"csrf": {csrfOf(t, page.body)}, "turn": {id}, "call": {"c1/w1"}, "action": {"approve"}})
	require.Equal(t, http.StatusSeeOther, r.code, r.body)
	res := e.result(id)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
}

// A wait two levels down (desk calls boss, which calls writer) is listed
// on the top turn with every agent down to it, shown in the inbox with
// the whole chain, and answered there.
func TestInboxShowsTheWholeChainOfAWaitTwoLevelsDown(t *testing.T) {
	e := newEnv(t, envOptions{agents: gatewayAgents})
	ops := e.key("ops", []apikey.Scope{apikey.Read, apikey.Start, apikey.Respond})
	id := e.startAgent(ops, `{"agent":"agdesk","prompt":"notes please"}`)
	boss, writer := id+"/d1", id+"/d1/c1"
	e.turns = append(e.turns, id, boss, writer)
	e.waitListed(id, workflows.StatusWaiting)

	var top gatewayTurn
	require.Eventually(t, func() bool {
		listed := e.do(request{method: http.MethodGet, path: "/v1/turns?status=waiting", key: ops})
		require.Equal(t, http.StatusOK, listed.code, listed.body)
		for _, tr := range decodeJSON[struct {
			Turns []gatewayTurn `json:"turns"`
		}](t, listed.body).Turns {
			if tr.ID == id {
				top = tr
			}
		}
		return len(top.Waiting) == 1
	}, 20*time.Second, 50*time.Millisecond)
	require.Equal(t, "d1/c1/w1", top.Waiting[0].CallID)
	require.Len(t, top.Agents, 2)
	require.Equal(t, boss, top.Agents[0].Turn)
	require.Equal(t, []string{"agdesk", "agboss"}, top.Agents[0].Chain)
	require.Equal(t, writer, top.Agents[1].Turn)
	require.Equal(t, []string{"agdesk", "agboss", "agwriter"}, top.Agents[1].Chain)
	require.Equal(t, "d1/c1/w1", top.Agents[1].Waiting[0].CallID, "ids as the top turn shows them")

	// A key limited to another user learns nothing of the chain: not the
	// top turn, not the called agents' turns, and it cannot answer the
	// wait through the top turn.
	other := e.keyFor("bobdesk", []apikey.Scope{apikey.Read, apikey.Respond}, e.name+"-bob")
	for _, path := range []string{"/v1/turns?status=waiting", "/v1/turns?children=true", "/v1/turns?parent=" + url.QueryEscape(id), "/v1/turns?parent=" + url.QueryEscape(boss)} {
		r := e.do(request{method: http.MethodGet, path: path, key: other})
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.NotContains(t, r.body, id, path)
	}
	r := e.do(request{method: http.MethodPost, path: "/v1/turns/" + url.PathEscape(id) + "/respond", key: other, header: jsonBody, body: `{"call_id":"d1/c1/w1","decision":"approve"}`})
	require.Equal(t, http.StatusNotFound, r.code, r.body)
	otherBrowser := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(otherBrowser, other).code)
	otherPage := e.inbox(otherBrowser)
	require.Equal(t, http.StatusOK, otherPage.code)
	require.NotContains(t, otherPage.body, "d1/c1/w1")

	browser := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(browser, ops).code)
	page := e.inbox(browser)
	require.Equal(t, http.StatusOK, page.code)
	require.Equal(t, 1, strings.Count(page.body, `data-call="d1/c1/w1"`), "the call shows once, under the top turn")
	require.Contains(t, page.body, "agents agdesk → agboss → agwriter")

	r = postForm(t, browser, e.http.URL, "/inbox/respond", url.Values{"csrf": {csrfOf(t, page.body)}, "turn": {id}, "call": {"d1/c1/w1"}, "action": {"approve"}})
	require.Equal(t, http.StatusSeeOther, r.code, r.body)
	res := e.result(id)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Your notes are written.", res.Text)
}

type gatewayTurn struct {
	ID      string              `json:"id"`
	Waiting []results.Card      `json:"waiting"`
	Agents  []results.AgentCall `json:"agents"`
}

// startAgent starts a turn through the gateway with key and the JSON
// body given, and returns its id.
func (e *env) startAgent(key, body string) string {
	e.t.Helper()
	started := e.do(request{method: http.MethodPost, path: "/v1/turns", key: key, body: body})
	require.Equal(e.t, http.StatusCreated, started.code, started.body)
	return decodeJSON[map[string]string](e.t, started.body)["id"]
}
