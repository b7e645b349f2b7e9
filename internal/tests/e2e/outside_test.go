package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/internal/turnlist"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// receiver is a webhook endpoint that checks every delivery's signature
// as a receiver's own library would.
type receiver struct {
	t      *testing.T
	verify *standardwebhooks.Webhook
	mu     sync.Mutex
	got    []webhook.Payload
}

func newReceiver(t *testing.T, secret []byte) (*receiver, *httptest.Server) {
	wh, err := standardwebhooks.NewWebhookRaw(secret)
	require.NoError(t, err)
	r := &receiver{t: t, verify: wh}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil || r.verify.Verify(body, req.Header) != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, p)
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) byType() map[string]webhook.Payload {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]webhook.Payload{}
	for _, p := range r.got {
		out[p.Type] = p
	}
	return out
}

// An outside system finds a waiting turn through the search attributes
// (as `temporal workflow list --query 'TollgateStatus="waiting"'` and the
// gateway do) and hears of its wait, the decision and its end through
// signed webhooks whose approve link is bound to the call's arguments.
func TestOutsideSystemsFindAndHearOfWaitingTurns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "outside_search_webhooks")
	secret := bytes.Repeat([]byte("s"), 32)
	linkSecret := bytes.Repeat([]byte("l"), 32)
	signer, err := signedtoken.NewSigner(linkSecret)
	require.NoError(t, err)
	rcv, srv := newReceiver(t, secret)
	e.searchAttributes = true
	e.webhooks = webhook.Options{URLs: []string{srv.URL}, Secret: secret, Links: signer, GatewayURL: "https://gateway.example"}

	args := map[string]string{"path": "summary.md", "content": "# Summary\n"}
	model := e.script(
		reply("", call("w1", "write_file", args)),
		expecting(reply("Written."), 1, "created summary.md"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Summarise", Model: model, Tools: []string{"write_file"}, User: "ann"})
	e.waitCard(run, "w1", results.StatePendingApproval)

	query := fmt.Sprintf(`WorkflowId = %q AND TollgateStatus = "waiting" AND TollgateUser = "ann" AND TollgateWaitingTools = "write_file"`, run.GetID())
	require.True(t, eventually(func() bool { return len(e.list(query)) == 1 }), "the waiting turn is listed by its search attributes")
	listed := e.list(query)[0]
	require.Equal(t, []string{"w1"}, keywordList(t, listed.GetSearchAttributes().GetIndexedFields()["TollgateWaitingCalls"].GetData()))

	require.True(t, eventually(func() bool { _, ok := rcv.byType()[webhook.TypeCallWaiting]; return ok }), "call.waiting delivered")
	waiting := rcv.byType()[webhook.TypeCallWaiting]
	require.Equal(t, run.GetID(), waiting.Data.Turn)
	require.Equal(t, "w1", waiting.Data.Card.CallID)
	require.NotNil(t, waiting.Data.Links)
	token := lastPathElement(waiting.Data.Links.Approve)
	claims, err := signer.VerifyLink(token, waiting.Timestamp)
	require.NoError(t, err)
	require.Equal(t, run.GetID(), claims.Turn)
	require.Equal(t, results.DecisionApprove, claims.Decision)
	require.Equal(t, signedtoken.ArgsHash(waiting.Data.Card.EffectiveArguments()), claims.ArgsHash)

	_, err = respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "ann"})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCompleted, e.result(run).Status)

	done := fmt.Sprintf(`WorkflowId = %q AND TollgateStatus = "completed"`, run.GetID())
	require.True(t, eventually(func() bool { return len(e.list(done)) == 1 }), "the ended turn is listed as completed")
	require.True(t, eventually(func() bool { return len(rcv.byType()) == 3 }), "call.decided and turn.ended delivered")
	got := rcv.byType()
	require.Equal(t, "ann", got[webhook.TypeCallDecided].Data.Card.Decisions[0].By)
	require.Equal(t, string(workflows.StatusCompleted), got[webhook.TypeTurnEnded].Data.Status)
	require.Equal(t, "Written.", got[webhook.TypeTurnEnded].Data.Text)
	e.record(run)
}

// A turn that cannot start (it names a tool the worker does not offer)
// fails, and reads as failed, with why, wherever it is read: its state
// query, its search attributes, the turn list the gateway and `starter
// list` show, and its turn.ended event.
func TestATurnThatCannotStartReadsFailedEverywhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "setup_failed")
	secret := bytes.Repeat([]byte("s"), 32)
	rcv, srv := newReceiver(t, secret)
	e.searchAttributes = true
	e.webhooks = webhook.Options{URLs: []string{srv.URL}, Secret: secret}
	e.startWorker()
	// The package's tests share a server: the user is this run's alone.
	user := "ann-" + e.tq
	run := e.start(workflows.Input{Prompt: "Summarise", Model: e.script(reply("Never asked.")), Tools: []string{"write_file", "nope"}, User: user})
	ctx, cancel := context.WithTimeout(context.Background(), resultTimeout)
	defer cancel()
	err := run.Get(ctx, nil)
	var failed *temporal.WorkflowExecutionError
	require.ErrorAs(t, err, &failed, "the workflow fails")
	require.ErrorContains(t, err, "unknown tool(s) nope")

	s, err := state(ctx, e.caller, run)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusFailed, s.Status)
	require.Contains(t, s.Error, "the turn could not start: unknown tool(s) nope; this worker offers:")

	var listed []turnlist.Turn
	require.True(t, eventually(func() bool {
		listed, err = turnlist.List(ctx, e.caller, turnlist.Filter{Status: workflows.StatusFailed, User: user})
		return err == nil && len(listed) == 1
	}), "the turn is listed as failed; last %v, %v", listed, err)
	require.Equal(t, run.GetID(), listed[0].ID)
	require.Equal(t, workflows.StatusFailed, listed[0].Status)
	require.NotNil(t, listed[0].CloseTime)
	running, err := turnlist.List(ctx, e.caller, turnlist.Filter{Status: workflows.StatusRunning, User: user})
	require.NoError(t, err)
	require.Empty(t, running, "a failed turn is not listed as running")

	require.True(t, eventually(func() bool { _, ok := rcv.byType()[webhook.TypeTurnEnded]; return ok }), "turn.ended delivered")
	require.Equal(t, string(workflows.StatusFailed), rcv.byType()[webhook.TypeTurnEnded].Data.Status)
	e.record(run)
}

func (e *env) list(query string) []*workflowpb.WorkflowExecutionInfo {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	resp, err := e.caller.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: e.namespace, Query: query})
	require.NoError(e.t, err)
	return resp.GetExecutions()
}

func keywordList(t *testing.T, data []byte) []string {
	var out []string
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}

func lastPathElement(u string) string {
	return u[strings.LastIndexByte(u, '/')+1:]
}
