package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/agents"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// gatewayClient calls an in-process gateway with one key.
type gatewayClient struct {
	t   *testing.T
	url string
	key string
}

// do sends a request and decodes the answer into out, requiring status.
func (g gatewayClient) do(method, path string, body any, status int, out any) {
	g.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(g.t, err)
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, g.url+path, r)
	require.NoError(g.t, err)
	req.Header.Set("Authorization", "Bearer "+g.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(g.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(g.t, err)
	require.Equal(g.t, status, resp.StatusCode, "%s %s: %s", method, path, b)
	if out != nil {
		require.NoError(g.t, json.Unmarshal(b, out), "%s %s: %s", method, path, b)
	}
}

// The offline triage team of examples/triage/dev (the agents file and
// scripts `make run AGENTS=... SCRIPTS=...` starts), driven through the
// gateway as the walk-through in docs/agents.md drives it: triage hands
// the request to billing, the transferred turn is continued with billing,
// billing asks researcher and then payments (both agents called as
// tools), and payments' refund waits for approval two levels below the
// turn the user started. The waiting list and the inbox show it once,
// under billing's turn, with the chain of agents; approving it there
// finishes the whole chain, and `starter state` prints the tree.
func TestTriageTeamFromTheDevAgentsFileThroughTheGateway(t *testing.T) {
	t.Parallel()
	var starter func() string
	if !testing.Short() {
		starter = buildProgram(t, "./starter")
	}
	e := newEnv(t, "triage_dev_chain")
	dev := filepath.Join(moduleRoot(t), "examples", "triage", "dev")
	team, err := agents.Load(filepath.Join(dev, "agents.yaml"))
	require.NoError(t, err)
	e.agents, e.scripts, e.searchAttributes = team, dev, true
	e.startWorker()

	key, entry, err := apikey.New("ann", apikey.Scopes, nil)
	require.NoError(t, err)
	keys, err := apikey.NewSet(entry)
	require.NoError(t, err)
	gw, err := gateway.New(gateway.Options{Temporal: e.caller, TaskQueue: e.tq, Keys: keys})
	require.NoError(t, err)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	g := gatewayClient{t: t, url: srv.URL, key: key}

	var listed struct {
		Agents []workflows.AgentInfo `json:"agents"`
	}
	g.do(http.MethodGet, "/v1/agents", nil, http.StatusOK, &listed)
	require.Len(t, listed.Agents, 4)

	var started struct {
		ID string `json:"id"`
	}
	g.do(http.MethodPost, "/v1/turns", map[string]any{"agent": "triage", "prompt": "My kettle from order 7 broke; refund it please."}, http.StatusCreated, &started)
	first := e.caller.GetWorkflow(context.Background(), started.ID, "")
	e.track(first)
	res := e.result(first)
	require.Equal(t, workflows.StatusTransferred, res.Status, res.Error)
	require.Equal(t, "billing", res.Transfer.Target)

	var next struct {
		ID string `json:"id"`
	}
	g.do(http.MethodPost, "/v1/turns/"+started.ID+"/continue", map[string]any{}, http.StatusCreated, &next)
	billing := e.caller.GetWorkflow(context.Background(), next.ID, "")
	e.track(billing)
	payments := workflows.ChildTurnID(next.ID, "p1")

	// Visibility catches up on its own time.
	var waiting gateway.TurnList
	require.True(t, eventually(func() bool {
		waiting = gateway.TurnList{}
		g.do(http.MethodGet, "/v1/turns?status=waiting", nil, http.StatusOK, &waiting)
		return slices.ContainsFunc(waiting.Turns, func(t gateway.Turn) bool { return t.ID == next.ID && len(t.Waiting) == 1 })
	}), "billing's turn never listed as waiting: %+v", waiting)
	for _, lt := range waiting.Turns {
		require.False(t, strings.HasPrefix(lt.ID, next.ID+"/"), "the called agent's turn %s is listed on its own", lt.ID)
	}
	w := waiting.Turns[slices.IndexFunc(waiting.Turns, func(t gateway.Turn) bool { return t.ID == next.ID })]
	require.Equal(t, []string{"p1/w1"}, w.WaitingCalls)
	require.Equal(t, "p1/w1", w.Waiting[0].CallID)
	require.Equal(t, results.StatePendingApproval, w.Waiting[0].State)
	require.Equal(t, "write_file", w.Waiting[0].Tool)
	require.Len(t, w.Agents, 1)
	require.Equal(t, results.AgentCall{Name: "payments", Turn: payments, Chain: []string{"billing", "payments"}, Waiting: w.Waiting}, w.Agents[0])

	var st workflows.State
	g.do(http.MethodGet, "/v1/turns/"+next.ID, nil, http.StatusOK, &st)
	r1 := mustCard(t, st.Cards, "r1")
	require.Equal(t, results.StateSucceeded, r1.State)
	require.Equal(t, next.ID+"/r1", r1.Agent.Turn)
	require.Equal(t, "Order 7: one kettle, paid 4999 cents.", outputText(r1))
	require.Equal(t, results.StateRunning, mustCard(t, st.Cards, "p1").State)

	var children gateway.TurnList
	require.True(t, eventually(func() bool {
		children = gateway.TurnList{}
		g.do(http.MethodGet, "/v1/turns?parent="+next.ID, nil, http.StatusOK, &children)
		return len(children.Turns) == 2
	}), "the called agents' turns are listed under their caller: %+v", children)
	ids := []string{children.Turns[0].ID, children.Turns[1].ID}
	slices.Sort(ids)
	require.Equal(t, []string{payments, next.ID + "/r1"}, ids)

	// The inbox shows the call once, under billing's turn, with the chain.
	browser := inboxBrowser(t, srv.URL, key)
	page := browser.get("/inbox")
	require.Contains(t, page, `data-turn="`+next.ID+`" data-call="p1/w1"`)
	require.NotContains(t, page, `data-turn="`+payments+`"`, "the called agent's call shows under its caller only")
	require.Contains(t, page, "agents billing → payments")
	require.Contains(t, page, "refunds/order-7.txt")

	if starter != nil {
		out := runStarter(t, e, starter(), "state", next.ID)
		for _, want := range []string{
			"turn " + next.ID + ": waiting, step 2, 2 call(s)\n",
			"  running            p1 agent_payments: running",
			"    r1: agent researcher (billing → researcher), turn " + next.ID + "/r1: completed, step 1, 0 call(s)\n",
			"    p1: agent payments (billing → payments), turn " + payments + ": waiting, step 1, 1 call(s)\n",
			"      pending_approval   w1 write_file: pending approval",
			"→ starter approve " + next.ID + " p1/w1",
		} {
			require.Contains(t, out, want)
		}
	}

	// Approved from the inbox, through billing's turn: the call id is
	// routed down to payments' turn.
	require.Equal(t, http.StatusSeeOther, browser.post("/inbox/respond", url.Values{
		"csrf": {csrfOf(t, page)}, "turn": {next.ID}, "call": {"p1/w1"}, "action": {"approve"},
	}))

	done := e.result(billing)
	require.Equal(t, workflows.StatusCompleted, done.Status, done.Error)
	require.Equal(t, "Refunded 49.99 for your kettle.", done.Text)
	p1 := mustCard(t, done.Cards, "p1")
	require.Equal(t, results.StateSucceeded, p1.State)
	require.Equal(t, "Paid 4999 cents back on order 7.", outputText(p1))
	paidRun := e.caller.GetWorkflow(context.Background(), payments, "")
	e.track(paidRun)
	paid := e.result(paidRun)
	require.Equal(t, workflows.StatusCompleted, paid.Status, paid.Error)
	w1 := mustCard(t, paid.Cards, "w1")
	require.Equal(t, results.StateSucceeded, w1.State)
	require.Len(t, w1.Decisions, 1)
	require.Equal(t, "ann", w1.Decisions[0].By)
	b, err := os.ReadFile(filepath.Join(e.ws, "refunds", "order-7.txt"))
	require.NoError(t, err)
	require.Equal(t, "refund 4999 cents on order 7\n", string(b))
	require.True(t, eventually(func() bool {
		waiting = gateway.TurnList{}
		g.do(http.MethodGet, "/v1/turns?status=waiting", nil, http.StatusOK, &waiting)
		return !slices.ContainsFunc(waiting.Turns, func(t gateway.Turn) bool { return strings.HasPrefix(t.ID, next.ID) })
	}), "nothing of the chain waits any more: %+v", waiting)
	e.record(billing)
	// Payments' turn: the approval two levels below the user's turn,
	// answered with the Update routed down from billing's.
	e.recordAs(paidRun, e.name+".payments")
}

// inboxSession is a browser signed in to the inbox.
type inboxSession struct {
	t    *testing.T
	c    *http.Client
	base string
}

// csrfOf is the CSRF token of the first form on a page.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	require.NotNil(t, m, "no csrf field on the page:\n%s", page)
	return m[1]
}

// inboxBrowser signs in to the inbox at base with key, as a person does
// with the login form.
func inboxBrowser(t *testing.T, base, key string) inboxSession {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	b := inboxSession{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	login := b.get("/inbox")
	require.Equal(t, http.StatusSeeOther, b.post("/inbox/login", url.Values{"csrf": {csrfOf(t, login)}, "key": {key}}))
	return b
}

func (b inboxSession) get(path string) string {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusOK, resp.StatusCode, "GET %s: %s", path, body)
	return string(body)
}

func (b inboxSession) post(path string, form url.Values) int {
	b.t.Helper()
	resp, err := b.c.PostForm(b.base+path, form)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Logf("POST %s: %d %s", path, resp.StatusCode, body)
	}
	return resp.StatusCode
}

// runStarter runs the starter binary against the env's server and
// returns its stdout.
func runStarter(t *testing.T, e *env, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--address", e.hostPort, "--namespace", e.namespace, "--task-queue", e.tq, "--data", e.data}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "starter %v: %s", args, stderr.String())
	return string(out)
}
