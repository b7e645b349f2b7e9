package gateway_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// keyInGroups adds a key whose principal belongs to groups.
func (e *env) keyInGroups(principal string, groups ...string) string {
	e.t.Helper()
	k, entry, err := apikey.NewLimited(principal, []apikey.Scope{apikey.Read, apikey.Respond}, apikey.Limits{Groups: groups})
	require.NoError(e.t, err)
	require.NoError(e.t, e.keys.Add(entry))
	return k
}

// A production deploy needs two approvers of group leads: the gateway
// passes each key's principal and groups to the turn, which refuses a key
// outside the group and the same lead twice, and runs the call on the
// second lead's approval.
func TestTwoLeadsApproveACallThatNeedsTwo(t *testing.T) {
	e := newEnv(t, envOptions{rules: []policy.Rule{{
		Name: "production", Tools: []string{"deploy"}, When: `args.env == "production"`,
		Action: policy.ActionRequireApproval, Reason: "production deploys need two leads", Group: "leads", Quorum: 2,
	}}})
	ann, bob := e.keyInGroups("ann", "leads"), e.keyInGroups("bob", "leads", "ops")
	eve := e.keyInGroups("eve", "ops")
	id := e.park("", "one-production", "carl", 1)
	respond := func(key string) response {
		return e.do(request{method: "POST", path: "/v1/turns/" + id + "/respond", key: key, body: `{"call_id":"d1","decision":"approve"}`})
	}

	r := respond(eve)
	require.Equal(t, http.StatusUnprocessableEntity, r.code, r.body)
	require.Equal(t, "call d1 may only be answered by members of group leads (rule production); eve is not one", r.error(t))

	// The inbox says why the call asks, who may answer and how far it
	// has got, and offers no buttons to a key outside the group.
	e.waitListed(id, workflows.StatusWaiting)
	outsider := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(outsider, eve).code)
	page := e.inbox(outsider)
	require.Contains(t, page.body, "Rule <b>production</b>: production deploys need two leads")
	require.Contains(t, page.body, "Answered by members of <b>leads</b>. Approvals 0 of 2.")
	require.Contains(t, page.body, "Only members of leads may answer this call (rule production).")
	require.NotContains(t, page.body, `class="approve-form"`)

	r = respond(ann)
	require.Equal(t, http.StatusOK, r.code, r.body)
	lead := browserClient(t)
	require.Equal(t, http.StatusSeeOther, e.login(lead, bob).code)
	page = e.inbox(lead)
	require.Contains(t, page.body, "Approvals 1 of 2: ann.")
	require.Contains(t, page.body, `class="approve-form"`)
	card := decodeJSON[results.Card](t, r.body)
	require.Equal(t, results.StatePendingApproval, card.State)
	require.Equal(t, []string{"ann"}, card.Approval.Approvals)
	require.Equal(t, 2, card.Approval.Quorum)
	require.Equal(t, "production deploys need two leads", card.Approval.Message)

	before := deployed.Load()
	r = respond(bob)
	require.Equal(t, http.StatusOK, r.code, r.body)
	s := e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	c := s.Cards[0]
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, []string{"ann", "bob"}, c.Approval.Approvals)
	require.Equal(t, "ann", c.Decisions[0].By)
	require.Equal(t, "bob", c.Decisions[1].By)
	require.Equal(t, before+1, deployed.Load())
}

// Re-evaluation needs the operate scope: a key that may answer calls
// gets 403, an operator's key gets each waiting call's outcome, and the
// call keeps waiting where today's rules still ask.
func TestReevaluateNeedsTheOperateScope(t *testing.T) {
	e := newEnv(t, envOptions{rules: []policy.Rule{{
		Name: "production", Tools: []string{"deploy"}, When: `args.env == "production"`,
		Action: policy.ActionRequireApproval, Reason: "production deploys need two leads", Group: "leads", Quorum: 2,
	}}})
	id := e.park("", "one-production", "carl", 1)
	e.waitListed(id, workflows.StatusWaiting)
	path := "/v1/turns/" + id + "/reevaluate"

	r := e.do(request{method: "POST", path: path, key: e.key("ann", []apikey.Scope{apikey.Read, apikey.Respond, apikey.Start})})
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	require.Equal(t, "the key of ann does not have the operate scope this needs", r.error(t))

	r = e.do(request{method: "POST", path: path, key: e.key("olga", []apikey.Scope{apikey.Operate})})
	require.Equal(t, http.StatusOK, r.code, r.body)
	out := decodeJSON[workflows.Reevaluation](t, r.body)
	require.Len(t, out.Calls, 1)
	require.Equal(t, workflows.Reevaluated{CallID: "d1", Tool: "deploy", Outcome: workflows.ReevaluatedUnchanged,
		Was: "production/require_approval", Now: "production/require_approval", Card: out.Calls[0].Card}, out.Calls[0])
	require.Equal(t, results.StatePendingApproval, out.Calls[0].Card.State)

	r = e.do(request{method: "POST", path: "/v1/turns/nope/reevaluate", key: e.key("olga2", []apikey.Scope{apikey.Operate})})
	require.Equal(t, http.StatusNotFound, r.code, r.body)
}
