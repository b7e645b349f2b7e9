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
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Workspace == "" {
		opts.Workspace = t.TempDir()
	}
	providers := map[string]model.Provider{ModelPrefix: m}
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
	p.Register(env)
	return &Turn{Env: env, Model: m, t: t}
}

// RespondAt sends the respond Update after d of workflow time. A refusal
// fails the test unless the response is expected to be refused; use
// Env.UpdateWorkflow directly to assert on refusals.
func (tr *Turn) RespondAt(d time.Duration, r workflows.Response) {
	tr.Env.RegisterDelayedCallback(func() {
		tr.Env.UpdateWorkflow(workflows.RespondName, tollgate.ResponseID(r), &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) {
				tr.t.Errorf("tollgatetest: the turn refused %s for call %s: %v", r.Decision, r.CallID, err)
			},
			OnComplete: func(any, error) {},
		}, r)
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
	if in.Model == "" {
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
