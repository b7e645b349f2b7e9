package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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
// gateway: triage hands the request to billing, the transferred turn is
// continued with billing, billing asks researcher (a child turn) and its
// refund waits for approval; the waiting list shows billing's turn and
// not the researcher's, and approving there finishes the whole chain.
func TestTriageTeamFromTheDevAgentsFileThroughTheGateway(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "triage_dev_gateway")
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
	require.Len(t, listed.Agents, 3)

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

	// Visibility catches up on its own time.
	var waiting gateway.TurnList
	require.True(t, eventually(func() bool {
		waiting = gateway.TurnList{}
		g.do(http.MethodGet, "/v1/turns?status=waiting", nil, http.StatusOK, &waiting)
		return slices.ContainsFunc(waiting.Turns, func(t gateway.Turn) bool { return t.ID == next.ID && len(t.Waiting) == 1 })
	}), "billing's turn never listed as waiting: %+v", waiting)
	i := slices.IndexFunc(waiting.Turns, func(t gateway.Turn) bool { return t.ID == next.ID })
	w := waiting.Turns[i]
	require.Equal(t, []string{"p1"}, w.WaitingCalls)
	require.Equal(t, results.StatePendingApproval, w.Waiting[0].State)
	require.Equal(t, "write_file", w.Waiting[0].Tool)

	var st workflows.State
	g.do(http.MethodGet, "/v1/turns/"+next.ID, nil, http.StatusOK, &st)
	r1 := mustCard(t, st.Cards, "r1")
	require.Equal(t, results.StateSucceeded, r1.State)
	require.Equal(t, next.ID+"/r1", r1.Agent.Turn)
	require.Equal(t, "Order 7: one kettle, paid 4999 cents.", outputText(r1))

	var all gateway.TurnList
	g.do(http.MethodGet, "/v1/turns", nil, http.StatusOK, &all)
	for _, lt := range all.Turns {
		require.False(t, strings.HasPrefix(lt.ID, next.ID+"/"), "the researcher's turn %s is listed on its own", lt.ID)
	}
	var children gateway.TurnList
	require.True(t, eventually(func() bool {
		children = gateway.TurnList{}
		g.do(http.MethodGet, "/v1/turns?parent="+next.ID, nil, http.StatusOK, &children)
		return len(children.Turns) == 1
	}), "the researcher's turn is listed under its parent: %+v", children)
	require.Equal(t, next.ID+"/r1", children.Turns[0].ID)

	var card results.Card
	g.do(http.MethodPost, "/v1/turns/"+next.ID+"/respond", map[string]any{"call_id": "p1", "decision": "approve"}, http.StatusOK, &card)
	require.Equal(t, "p1", card.CallID)

	done := e.result(billing)
	require.Equal(t, workflows.StatusCompleted, done.Status, done.Error)
	require.Equal(t, "Refunded 49.99 for your kettle.", done.Text)
	b, err := os.ReadFile(filepath.Join(e.ws, "refunds", "order-7.txt"))
	require.NoError(t, err)
	require.Equal(t, "refund 4999 cents on order 7\n", string(b))
	e.record(billing)
}
