// Package tollgatetest is the test kit for agents built on Tollgate: a
// scripted model, a runner for AgentTurn in the SDK's test environment
// with your own tools and answers delivered at given times, and a replayer
// for recorded histories. It is to tollgate what httptest is to net/http.
package tollgatetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/replay"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Model is the scripted provider (model/scripted) playing the
// given replies: reply i answers a conversation that already holds i
// assistant messages, so it is stateless and a retried model call gets
// the same reply. It also records every request, for assertions on what
// the model saw.
type Model struct {
	script *scripted.Provider

	mu       sync.Mutex
	requests []model.Request
}

// NewModel is a Model with the given replies.
func NewModel(replies ...scripted.Reply) *Model {
	return &Model{script: scripted.New(&scripted.Script{Name: "tollgatetest", Replies: replies})}
}

// Complete implements model.Provider.
func (m *Model) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	return m.script.Complete(ctx, req)
}

// Requests are the requests the model received, oldest first.
func (m *Model) Requests() []model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]model.Request(nil), m.requests...)
}

// Reply is an assistant reply with text and tool calls.
func Reply(text string, calls ...scripted.ToolCall) scripted.Reply {
	return scripted.Reply{Text: text, ToolCalls: calls}
}

// Call is a tool call with arguments marshalled from args.
func Call(id, tool string, args any) scripted.ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic(fmt.Sprintf("tollgatetest.Call: arguments of %s: %v", id, err))
	}
	return scripted.ToolCall{ID: id, Name: tool, Arguments: b}
}

// ModelPrefix is the provider prefix a Turn's model answers to.
const ModelPrefix = "tollgatetest"

// Models scripts several agents, one Model each: the model
// "tollgatetest:<name>" plays Models[<name>]. Give each agent of
// tollgate.Options.Agents its own model string and pass the Models to
// NewAgentTurn.
type Models map[string]*Model

// Complete implements model.Provider.
func (ms Models) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	m, ok := ms[req.Model]
	if !ok {
		return model.Response{}, &model.Error{Message: fmt.Sprintf("tollgatetest: no model scripted as %q", req.Model)}
	}
	return m.Complete(ctx, req)
}

// TurnID is the workflow id of the turn a Turn runs; the turns of agents
// it calls as tools are TurnID/<call id>.
const TurnID = "tollgatetest-turn"

// Turn runs AgentTurn in the SDK's test environment with the tools and
// providers of opts and a test model. Time is virtual: a response due in
// 24 hours arrives at once.
type Turn struct {
	Env   *testsuite.TestWorkflowEnvironment
	Model *Model
	t     testing.TB
}

// NewTurn builds a Turn. The data directory and workspace default to
// temporary directories of t.
func NewTurn(t testing.TB, opts tollgate.Options, m *Model) *Turn {
	t.Helper()
	return newTurn(t, opts, m, m)
}

// NewAgentTurn builds a Turn whose agents (opts.Agents) each play their
// own script: an agent with model "tollgatetest:<name>" plays ms[<name>].
// Turn.Model is nil; assert on the Models instead.
func NewAgentTurn(t testing.TB, opts tollgate.Options, ms Models) *Turn {
	t.Helper()
	return newTurn(t, opts, ms, nil)
}

func newTurn(t testing.TB, opts tollgate.Options, provider model.Provider, m *Model) *Turn {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Workspace == "" {
		opts.Workspace = t.TempDir()
	}
	providers := map[string]model.Provider{ModelPrefix: provider}
	for prefix, p := range opts.Providers {
		providers[prefix] = p
	}
	opts.Providers = providers
	p, err := tollgate.NewPlugin(opts)
	if err != nil {
		t.Fatalf("tollgatetest: %v", err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	// The SDK fails a workflow task that runs 1s without yielding; a busy
	// machine can take that long for a first task that compiles schemas,
	// without any workflow code blocking.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 30 * time.Second})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: TurnID})
	p.Register(env)
	return &Turn{Env: env, Model: m, t: t}
}

// RespondAt sends the respond Update after d of workflow time. A refusal
// fails the test unless the response is expected to be refused; use
// Env.UpdateWorkflow directly to assert on refusals.
//
// A call id "<call>/<child call>", as a calling card's agent.waiting
// shows it, reaches the turn of the agent that call runs, as
// tollgate.Client routes it.
func (tr *Turn) RespondAt(d time.Duration, r workflows.Response) {
	tr.Env.RegisterDelayedCallback(func() {
		cb := &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) {
				tr.t.Errorf("tollgatetest: the turn refused %s for call %s: %v", r.Decision, r.CallID, err)
			},
			OnComplete: func(any, error) {},
		}
		turn, routed := workflows.RouteResponse(TurnID, r)
		if turn == TurnID {
			tr.Env.UpdateWorkflow(workflows.RespondName, tollgate.ResponseID(r), cb, r)
			return
		}
		if err := tr.Env.UpdateWorkflowByID(turn, workflows.RespondName, tollgate.ResponseID(routed), cb, routed); err != nil {
			tr.t.Errorf("tollgatetest: respond to %s: %v", turn, err)
		}
	}, d)
}

// StateAt runs the state Query after d of workflow time and passes the
// answer to f.
func (tr *Turn) StateAt(d time.Duration, f func(workflows.State)) {
	tr.Env.RegisterDelayedCallback(func() {
		v, err := tr.Env.QueryWorkflow(workflows.StateQuery)
		if err != nil {
			tr.t.Errorf("tollgatetest: state query: %v", err)
			return
		}
		var s workflows.State
		if err := v.Get(&s); err != nil {
			tr.t.Errorf("tollgatetest: decode state: %v", err)
			return
		}
		f(s)
	}, d)
}

// Run runs the turn to its end. An empty in.Model is the test model.
func (tr *Turn) Run(in workflows.Input) (workflows.Result, error) {
	if in.Model == "" && in.Agent == "" {
		in.Model = ModelPrefix + ":model"
	}
	tr.Env.ExecuteWorkflow(workflows.WorkflowName, in)
	if !tr.Env.IsWorkflowCompleted() {
		return workflows.Result{}, fmt.Errorf("tollgatetest: the turn did not complete")
	}
	if err := tr.Env.GetWorkflowError(); err != nil {
		return workflows.Result{}, err
	}
	var res workflows.Result
	if err := tr.Env.GetWorkflowResult(&res); err != nil {
		return workflows.Result{}, fmt.Errorf("tollgatetest: decode the result: %w", err)
	}
	return res, nil
}

// ReplayResult is what replaying one history file found.
type ReplayResult struct {
	File string
	// Events is the number of events read; zero when the file did not
	// load.
	Events int
	// Err says why the file did not replay: it did not load, or the code
	// no longer produces the recorded commands. Nil when it replayed.
	Err error
}

// Replay replays exported histories (`temporal workflow show --output
// json`, or starter history) against this build's AgentTurn. A directory
// stands for the *.json files in it. dataDir is the data directory whose
// payload store holds the payloads the histories refer to; empty means
// TOLLGATE_DATA or the default. One result per file, in order.
func Replay(ctx context.Context, dataDir string, paths ...string) []ReplayResult {
	var out []ReplayResult
	for _, r := range replay.Files(ctx, paths, replay.Options{DataDir: dataDir}) {
		out = append(out, ReplayResult{File: r.Path, Events: r.Events, Err: r.Err})
	}
	return out
}
