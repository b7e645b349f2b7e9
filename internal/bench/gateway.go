package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/internal/turnlist"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// GatewayQueue is the task queue of benchmark 8's turns.
const GatewayQueue = "bench-gateway"

// GatewayLists is how many list requests benchmark 8 times a side by
// default.
const GatewayLists = 50

// Gateway is benchmark 8: the HTTP gateway in front of parked turns. One
// worker serves every turn, so both ways of answering reach the same
// workflows through the same worker.
type Gateway struct {
	// Parked turns waited for a person while the lists ran; Limit is the
	// page the gateway lists by default, Listed what each page held.
	Parked, Limit, Listed int
	// HTTPSend and UpdateSend are respond sent → tool activity starts:
	// POST /v1/turns/{id}/respond to the gateway, and the respond Update
	// from the Go client (as benchmark 2c), alternating.
	HTTPSend, UpdateSend []time.Duration
	// List is GET /v1/turns?status=waiting until its body was read;
	// BareList a visibility ListWorkflow with the same query and page
	// size; Queries the state queries of one page straight from the Go
	// client, as many at once as the gateway runs (attribution).
	List, BareList, Queries []time.Duration
}

// GatewayOptions size benchmark 8.
type GatewayOptions struct {
	// Parked is the turns parked while the lists run; Samples the
	// measured approves a side; Lists the measured list requests a side.
	Parked, Samples, Lists int
	// Logf, if set, gets progress lines.
	Logf func(format string, args ...any)
}

// GatewayBench runs benchmark 8 on a server of its own, whose namespace
// has Tollgate's search attributes registered (as `worker --dev` does),
// and whose one worker keeps them current. It parks max(Parked,
// 2×(Samples+1)) turns, times lists over them, then answers 2×(Samples+1)
// of them, one at a time, alternately over HTTP and as an Update; the
// first answer each way warms up and is dropped.
func GatewayBench(ctx context.Context, o GatewayOptions) (*Gateway, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	parked, samples := o.Parked, o.Samples
	e, err := Start(Options{DynamicConfig: TunedDynamicConfig(), NoWorkers: true})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if err := tollgate.RegisterSearchAttributes(ctx, e.Client, "default"); err != nil {
		return nil, err
	}
	plugin, err := gatewayPlugin(e.DataDir)
	if err != nil {
		return nil, err
	}
	opts := WorkerOptions(e.Stamps)
	opts.Plugins = []worker.Plugin{plugin}
	w := worker.New(e.Client, GatewayQueue, opts)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start the gateway benchmark's worker: %w", err)
	}
	defer w.Stop()

	gw, err := newGatewayClient(e)
	if err != nil {
		return nil, err
	}
	defer gw.close()

	model, err := e.Script(1, 1, NoopTool, struct{}{})
	if err != nil {
		return nil, err
	}
	r := &Gateway{Parked: max(parked, 2*(samples+1)), Limit: turnlist.DefaultLimit}
	ids := make([]string, r.Parked)
	err = Pool(ctx, 50, r.Parked, func(ctx context.Context, i int) error {
		ids[i] = id("gateway")
		_, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: GatewayQueue}, workflows.WorkflowName, Unique(TurnInput(model, 1, true), ids[i]))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("park turns: %w", err)
	}
	if err := e.WaitParked(ctx, ids, 10); err != nil {
		return nil, err
	}
	if err := e.waitListed(ctx, r.Parked); err != nil {
		return nil, err
	}
	logf("8. gateway: %d turns parked and listed by visibility; timing lists", r.Parked)
	if err := r.measureLists(ctx, e, gw, o.Lists); err != nil {
		return nil, err
	}
	logf("8. gateway: timing approves")

	approve := workflows.Response{CallID: "call_1_1", Decision: results.DecisionApprove, By: "bench"}
	for i := 0; i <= samples; i++ {
		httpID, updateID := ids[2*i], ids[2*i+1]
		var dh, du time.Duration
		sides := []func() error{
			func() (err error) { dh, err = e.resumeOverHTTP(ctx, gw, httpID); return err },
			func() (err error) {
				_, du, err = e.resumeOne(ctx, updateID, workflows.RespondName, approve)
				return err
			},
		}
		// Alternate which goes first, so neither always follows the other.
		for k := range sides {
			if err := sides[(i+k)%2](); err != nil {
				return nil, err
			}
		}
		if i == 0 {
			continue
		}
		r.HTTPSend, r.UpdateSend = append(r.HTTPSend, dh), append(r.UpdateSend, du)
	}
	return r, nil
}

// gatewayPlugin is NewPlugin with the search attributes on: the list
// finds turns by TollgateStatus.
func gatewayPlugin(dataDir string) (*tollgate.Plugin, error) {
	return tollgate.NewPlugin(tollgate.Options{
		DataDir:          dataDir,
		Workspace:        workspaceDir(dataDir),
		Models:           providers.Config{ScriptDir: filepath.Join(dataDir, "scripts")},
		Tools:            Tools(),
		NoBuiltins:       true,
		SearchAttributes: true,
	})
}

// waitListed waits until visibility counts n turns waiting: the
// attribute is indexed a little after the workflow task that set it.
func (e *Env) waitListed(ctx context.Context, n int) error {
	q := turnlist.Filter{Status: workflows.StatusWaiting}.Query()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := e.Client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: q})
		if err != nil {
			return fmt.Errorf("count waiting turns: %w", err)
		}
		if resp.GetCount() >= int64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("visibility counts %d of %d parked turns as waiting after 2 minutes", resp.GetCount(), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// measureLists times lists requests of each kind, rotating their order,
// after two unmeasured ones each.
func (r *Gateway) measureLists(ctx context.Context, e *Env, gw *gatewayClient, lists int) error {
	q := turnlist.Filter{Status: workflows.StatusWaiting}.Query()
	want := min(r.Parked, r.Limit)
	bare := func() (time.Duration, error) {
		t0 := time.Now()
		resp, err := e.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: int32(r.Limit), Query: q})
		d := time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("list workflows: %w", err)
		}
		if n := len(resp.GetExecutions()); n != want {
			return 0, fmt.Errorf("visibility listed %d waiting turns, not %d", n, want)
		}
		return d, nil
	}
	page, err := turnlist.List(ctx, e.Client, turnlist.Filter{Status: workflows.StatusWaiting})
	if err != nil {
		return err
	}
	queries := func() (time.Duration, error) {
		t0 := time.Now()
		err := Pool(ctx, gatewayListConcurrency, len(page), func(ctx context.Context, i int) error {
			v, err := e.Client.QueryWorkflow(ctx, page[i].ID, page[i].RunID, workflows.StateQuery)
			if err != nil {
				return fmt.Errorf("query the state of %s: %w", page[i].ID, err)
			}
			var st workflows.State
			return v.Get(&st)
		})
		return time.Since(t0), err
	}
	listed := func() (time.Duration, error) {
		d, n, err := gw.list(ctx)
		r.Listed = n
		return d, err
	}
	for i := -2; i < lists; i++ {
		var dg, db, dq time.Duration
		kinds := []func() error{
			func() (err error) { dg, err = listed(); return err },
			func() (err error) { db, err = bare(); return err },
			func() (err error) { dq, err = queries(); return err },
		}
		for k := range kinds {
			if err := kinds[(i+3+k)%3](); err != nil {
				return err
			}
		}
		if i >= 0 {
			r.List, r.BareList, r.Queries = append(r.List, dg), append(r.BareList, db), append(r.Queries, dq)
		}
	}
	if r.Listed != want {
		return fmt.Errorf("the gateway listed %d waiting turns, not %d", r.Listed, want)
	}
	return nil
}

// gatewayListConcurrency is the gateway's default ListConcurrency. The
// benchmark sets it, so that the straight queries run as many at once.
const gatewayListConcurrency = 16

// gatewayClient is the gateway on a loopback listener and an HTTP client
// that keeps its connection alive, as an outside system would.
type gatewayClient struct {
	srv  *httptest.Server
	http *http.Client
	key  string
}

func newGatewayClient(e *Env) (*gatewayClient, error) {
	key, entry, err := apikey.New("bench", apikey.Scopes, nil)
	if err != nil {
		return nil, err
	}
	keys, err := apikey.NewSet(entry)
	if err != nil {
		return nil, err
	}
	h, err := gateway.New(gateway.Options{
		Temporal: e.Client, TaskQueue: GatewayQueue, Keys: keys,
		ListConcurrency: gatewayListConcurrency,
		// It logs every applied response at info level.
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	return &gatewayClient{
		srv:  httptest.NewServer(h),
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: time.Minute},
		key:  key,
	}, nil
}

func (g *gatewayClient) close() {
	g.http.CloseIdleConnections()
	g.srv.Close()
}

// do sends a request and reads the whole answer, which a 200 must be.
func (g *gatewayClient) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, g.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+g.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	return data, nil
}

// list times GET /v1/turns?status=waiting and checks that every listed
// turn came with its waiting card, read by the state query.
func (g *gatewayClient) list(ctx context.Context) (time.Duration, int, error) {
	t0 := time.Now()
	data, err := g.do(ctx, http.MethodGet, "/v1/turns?status=waiting", nil)
	d := time.Since(t0)
	if err != nil {
		return 0, 0, err
	}
	var l gateway.TurnList
	if err := json.Unmarshal(data, &l); err != nil {
		return 0, 0, fmt.Errorf("decode the turn list: %w", err)
	}
	for _, t := range l.Turns {
		if t.Error != "" || len(t.Waiting) != 1 {
			return 0, 0, fmt.Errorf("turn %s was listed with %d waiting cards (%s), not 1", t.ID, len(t.Waiting), t.Error)
		}
	}
	return d, len(l.Turns), nil
}

// resumeOverHTTP is resumeOne with the approve sent to the gateway: POST
// sent → the tool activity starts. The gateway answers once the Update
// completed, which may be before or after the activity starts; the
// sample is the activity's start either way.
func (e *Env) resumeOverHTTP(ctx context.Context, gw *gatewayClient, wid string) (time.Duration, error) {
	start, done := e.Stamps.Arm(StartKey(wid)), e.Stamps.Arm(DoneKey(wid))
	defer e.Stamps.Disarm(StartKey(wid))
	defer e.Stamps.Disarm(DoneKey(wid))
	body, err := json.Marshal(map[string]any{"call_id": "call_1_1", "decision": results.DecisionApprove})
	if err != nil {
		return 0, err
	}
	sent := time.Now()
	if _, err := gw.do(ctx, http.MethodPost, "/v1/turns/"+url.PathEscape(wid)+"/respond", body); err != nil {
		return 0, err
	}
	var started time.Time
	select {
	case started = <-start:
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("%s: the tool activity did not start within 30s of the HTTP approve", wid)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	// Let the workflow finish so the next sample runs on a quiet system.
	if err := e.Wait(ctx, wid, done, nil); err != nil {
		return 0, err
	}
	return started.Sub(sent), nil
}

// runGateway is benchmark 8 in a suite run: as many answers a side as
// benchmark 2 takes.
func runGateway(ctx context.Context, cfg Config, m *measurements, logf func(string, ...any)) error {
	logf("8. gateway: parking %d turns", cfg.Gateway)
	var err error
	o := GatewayOptions{Parked: cfg.Gateway, Samples: 3 * cfg.ResumeSamples, Lists: cfg.GatewayLists, Logf: logf}
	if m.Gateway, err = GatewayBench(ctx, o); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}
