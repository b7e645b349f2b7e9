package gateway_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Everything here runs against the Temporal server's own in-process test
// server with real workers; nothing is mocked.

const waitTimeout = 30 * time.Second

var (
	serverOnce sync.Once
	server     *temporaltest.TestServer
	serverErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if server != nil {
		server.Stop()
	}
	if natsSrv != nil {
		natsSrv.Shutdown()
		_ = os.RemoveAll(natsDir)
	}
	os.Exit(code)
}

// sharedServer starts one server for the package and registers
// Tollgate's search attributes on it, as `worker --dev` does. Tests
// isolate themselves by task queue, turn id and user.
func sharedServer(t testing.TB) (hostPort, namespace string) {
	t.Helper()
	serverOnce.Do(func() {
		server = temporaltest.NewServer()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		serverErr = tollgate.RegisterSearchAttributes(ctx, server.GetDefaultClient(), server.GetDefaultNamespace())
	})
	require.NoError(t, serverErr, "register the search attributes")
	return server.GetFrontendHostPort(), server.GetDefaultNamespace()
}

var sdkLogger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))

var seq atomic.Int64

// Tools of the tests. deploy has a strict schema, so an edited argument
// can fail validation; both ask for approval.
var (
	deployed atomic.Int64
	deploy   = tool.MustFunc(tool.Spec{
		Name:        "deploy",
		Description: "Deploy a version to an environment.",
		Approval:    tool.ApprovalAlways,
		Schema: json.RawMessage(`{"type":"object","properties":{"env":{"type":"string","enum":["staging","production"]},"version":{"type":"string"}},` +
			`"required":["env"],"additionalProperties":false}`),
	}, func(_ context.Context, _ tool.Call, args struct {
		Env     string `json:"env"`
		Version string `json:"version"`
	}) (results.Outcome, error) {
		deployed.Add(1)
		return results.SucceedText("deployed " + args.Version + " to " + args.Env), nil
	})
	notify = tool.MustFunc(tool.Spec{
		Name:        "notify",
		Description: "Post a message to a channel.",
		Approval:    tool.ApprovalAlways,
	}, func(_ context.Context, _ tool.Call, args struct {
		Channel string `json:"channel"`
		Text    string `json:"text"`
	}) (results.Outcome, error) {
		return results.SucceedText("posted to " + args.Channel), nil
	})
	pick = tool.MustFunc(tool.Spec{
		Name:        "pick",
		Description: "Ask the person to pick a tone.",
	}, func(_ context.Context, call tool.Call, _ struct{}) (results.Outcome, error) {
		if call.Resume != nil {
			var tone string
			_ = json.Unmarshal(call.Resume.Answer, &tone)
			return results.SucceedText("tone: " + tone), nil
		}
		return results.NeedChoice("Which tone?", results.Option{ID: "formal", Label: "Formal"}, results.Option{ID: "friendly", Label: "Friendly"}), nil
	})
)

// scripts answer the model "gw:<name>": each a scripted conversation.
var scripts = map[string]*tollgatetest.Model{
	"two": tollgatetest.NewModel(
		tollgatetest.Reply("Deploying and telling the channel.",
			tollgatetest.Call("d1", "deploy", map[string]string{"env": "staging", "version": "1.2.3"}),
			tollgatetest.Call("n1", "notify", map[string]string{"channel": "#ops", "text": "deploying 1.2.3"})),
		tollgatetest.Reply("Deployed and notified."),
	),
	"one": tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("d1", "deploy", map[string]string{"env": "staging"})),
		tollgatetest.Reply("Done."),
	),
	"one-production": tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("d1", "deploy", map[string]string{"env": "production"})),
		tollgatetest.Reply("Done."),
	),
	"hostile": tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("d1", "deploy", map[string]string{"env": "staging", "version": `</pre><script>alert("owned")</script><b>`})),
		tollgatetest.Reply("Done."),
	),
	"write": tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("w1", "write_file", map[string]string{"path": "notes.md", "content": "first line\n<b>second</b>\n"})),
		tollgatetest.Reply("Written."),
	),
	"choice": tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("p1", "pick", map[string]string{})),
		tollgatetest.Reply("Done."),
	),
}

// prompts are the prompts of scripts whose turns are shown to people.
var prompts = map[string]string{}

type scriptProvider struct{}

// liveModels are models of the events tests written as functions
// (events_bench_test.go), by name.
var liveModels sync.Map

func (scriptProvider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if f, ok := liveModels.Load(req.Model); ok {
		return f.(func(context.Context, model.Request) (model.Response, error))(ctx, req)
	}
	m, ok := scripts[req.Model]
	if !ok {
		return model.Response{}, &model.Error{Message: "no test script " + req.Model}
	}
	return m.Complete(ctx, req)
}

// env is one test's world: a task queue with a worker, a gateway in
// front of it, and keys.
type env struct {
	t        testing.TB
	name     string
	hostPort string
	ns       string
	tq       string
	data     string
	caller   client.Client
	keys     *apikey.Set
	signer   *signedtoken.Signer
	srv      *gateway.Server
	http     *httptest.Server
	worker   worker.Worker
	pollers  int
	rules    []policy.Rule
	agents   []workflows.Agent
	turns    []string
	// events is the live event log, when the test asked for one.
	events *stream.NATS
}

type envOptions struct {
	respondTimeout time.Duration
	noWorker       bool
	// pollers, when set, is the worker's workflow task pollers; queries
	// reach a parked turn through them.
	pollers int
	// events is a NATS server's URL: the worker publishes live events
	// there and the gateway serves them (events_test.go).
	events string
	// rules are the worker's approval rules (approvals_test.go).
	rules []policy.Rule
	// agents are the worker's named agents (agents_test.go).
	agents []workflows.Agent
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	hostPort, ns := sharedServer(t)
	n := seq.Add(1)
	e := &env{
		t:        t,
		name:     fmt.Sprintf("gw%d", n),
		hostPort: hostPort,
		ns:       ns,
		tq:       fmt.Sprintf("gateway-test-%d", n),
		data:     t.TempDir(),
	}
	e.caller = e.dial()
	var err error
	e.keys, err = apikey.NewSet()
	require.NoError(t, err)
	e.signer, err = signedtoken.NewSigner([]byte(strings.Repeat("s", 32)))
	require.NoError(t, err)
	if o.respondTimeout == 0 {
		o.respondTimeout = 10 * time.Second
	}
	var source stream.Source
	if o.events != "" {
		e.events, err = stream.Connect(stream.Config{URL: o.events})
		require.NoError(t, err)
		t.Cleanup(e.events.Close)
		source = e.events
	}
	e.srv, err = gateway.New(gateway.Options{
		Events:         source,
		Temporal:       e.caller,
		TaskQueue:      e.tq,
		Keys:           e.keys,
		Links:          e.signer,
		RespondTimeout: o.respondTimeout,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	e.http = httptest.NewServer(e.srv)
	t.Cleanup(e.http.Close)
	e.pollers = o.pollers
	e.rules = o.rules
	e.agents = o.agents
	if !o.noWorker {
		e.startWorker()
	}
	// Turns left waiting would slow every later list; end them.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		for _, id := range e.turns {
			_ = e.caller.TerminateWorkflow(ctx, id, "", "test over")
		}
	})
	return e
}

func (e *env) dial() client.Client {
	e.t.Helper()
	p, err := tollgate.NewClientPlugin(e.data)
	require.NoError(e.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: e.hostPort, Namespace: e.ns, Logger: sdkLogger, Plugins: []client.Plugin{p}})
	require.NoError(e.t, err)
	e.t.Cleanup(c.Close)
	return c
}

func (e *env) startWorker() {
	e.t.Helper()
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		DataDir:   e.data,
		Workspace: e.t.TempDir(),
		Tools:     []tool.Tool{deploy, notify, pick},
		// write_file previews the diff it would make.
		Builtins:  []string{"write_file"},
		Providers: map[string]tollgate.Provider{"gw": scriptProvider{}},
		// sharedServer registered them.
		SearchAttributes: true,
		Events:           e.publisher(),
		Rules:            e.rules,
		Agents:           e.agents,
	})
	require.NoError(e.t, err)
	c := e.dial()
	w := worker.New(c, e.tq, worker.Options{Plugins: []worker.Plugin{plugin}, WorkerStopTimeout: 100 * time.Millisecond, MaxConcurrentWorkflowTaskPollers: e.pollers})
	require.NoError(e.t, w.Start())
	e.t.Cleanup(w.Stop)
	e.worker = w
}

// key adds a key to the gateway's set and returns it.
func (e *env) key(principal string, scopes []apikey.Scope, tools ...string) string {
	e.t.Helper()
	k, entry, err := apikey.New(principal, scopes, tools)
	require.NoError(e.t, err)
	require.NoError(e.t, e.keys.Add(entry))
	return k
}

// park starts a turn of script for user under id (empty: a fresh one)
// and waits until every call it makes waits for a person.
func (e *env) park(id, script, user string, calls int) string {
	e.t.Helper()
	if id == "" {
		id = fmt.Sprintf("%s-turn-%d", e.name, seq.Add(1))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}.Start(ctx, id, workflows.Input{
		Prompt: cmp.Or(prompts[script], "Ship version 1.2.3 to staging\nand tell #ops."),
		Model:  "gw:" + script,
		Tools:  []string{"deploy", "notify", "pick", "write_file"},
		User:   user,
	})
	require.NoError(e.t, err)
	e.turns = append(e.turns, id)
	if !e.hasWorker() {
		return id
	}
	e.waitState(id, fmt.Sprintf("%d waiting calls", calls), func(s workflows.State) bool {
		n := 0
		for _, c := range s.Cards {
			if c.State.Waiting() {
				n++
			}
		}
		return n == calls
	})
	return id
}

// publisher is what the worker publishes live events to: nil without
// an event log.
func (e *env) publisher() stream.Publisher {
	if e.events == nil {
		return nil
	}
	return e.events
}

func (e *env) hasWorker() bool { return e.worker != nil }

func (e *env) state(id string) (workflows.State, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return tollgate.Client{Temporal: e.caller}.State(ctx, id)
}

func (e *env) waitState(id, what string, cond func(workflows.State) bool) workflows.State {
	e.t.Helper()
	var last workflows.State
	var lastErr error
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		s, err := e.state(id)
		if err == nil && cond(s) {
			return s
		}
		last, lastErr = s, err
		time.Sleep(25 * time.Millisecond)
	}
	e.t.Fatalf("turn %s never reached %s; last state %+v, error %v", id, what, last, lastErr)
	return last
}

// waitListed waits until visibility lists turn id with status.
func (e *env) waitListed(id string, status workflows.Status) {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	q := fmt.Sprintf("WorkflowId = '%s' AND %s = '%s'", id, workflows.StatusAttr.GetName(), status)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err := e.caller.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: q})
		cancel()
		if err == nil && n.GetCount() == 1 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("visibility never listed %s as %s", id, status)
}

func card(t testing.TB, s workflows.State, id string) results.Card {
	t.Helper()
	for _, c := range s.Cards {
		if c.CallID == id {
			return c
		}
	}
	t.Fatalf("no card %s in %+v", id, s.Cards)
	return results.Card{}
}

// request is one HTTP call to the gateway.
type request struct {
	method, path, key string
	body              string
	header            map[string]string
}

type response struct {
	code   int
	header http.Header
	body   string
}

// error is the sentence of a JSON error body.
func (r response) error(t testing.TB) string {
	t.Helper()
	var b struct {
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &b), "body %q", r.body)
	require.NotEmpty(t, b.Error, "body %q", r.body)
	return b.Error
}

func (e *env) do(r request) response {
	e.t.Helper()
	return doWith(e.t, http.DefaultClient, e.http.URL, r)
}

func doWith(t testing.TB, c *http.Client, base string, r request) response {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, base+r.path, body)
	require.NoError(t, err)
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	if r.body != "" {
		// JSON routes take only JSON; a test that sends another type says so.
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

// browserClient is an HTTP client that keeps cookies and does not follow
// redirects, as a test of forms needs.
func browserClient(t testing.TB) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func decodeJSON[T any](t testing.TB, body string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(body), &v), "body %q", body)
	return v
}
