package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/grants"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/pricing"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/transcript"
	"github.com/tollgate-dev/tollgate/tool"
)

// fakeModel plays replies in order: reply i answers a conversation that
// already holds i assistant messages, so it is stateless and retry-safe.
// It records every request so tests can assert exactly what the model saw.
type fakeModel struct {
	mu       sync.Mutex
	replies  []results.Message
	requests []model.Request
	// failWith fails reply i with this provider error instead.
	failWith map[int]string
	// answer, when set, answers every request instead of the replies.
	answer func(req model.Request) (model.Response, error)
}

func (f *fakeModel) Resolve(string) (model.Provider, string, error) { return f, "fake", nil }

func (f *fakeModel) Complete(_ context.Context, req model.Request) (model.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if f.answer != nil {
		return f.answer(req)
	}
	n := 0
	for _, m := range req.Messages {
		if m.Role == results.RoleAssistant {
			n++
		}
	}
	if msg, ok := f.failWith[n]; ok {
		return model.Response{}, &model.Error{Message: msg}
	}
	if n >= len(f.replies) {
		return model.Response{}, &model.Error{Message: fmt.Sprintf("script has %d replies; asked for reply %d", len(f.replies), n+1)}
	}
	return model.Response{Message: f.replies[n], Usage: model.Usage{InputTokens: 10, OutputTokens: 5}}, nil
}

// last returns the messages of the last request.
func (f *fakeModel) last() []results.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1].Messages
}

func calls(text string, cs ...results.ToolCall) results.Message {
	m := results.Message{Role: results.RoleAssistant, ToolCalls: cs}
	if text != "" {
		m.Parts = []results.Part{results.TextPart(text)}
	}
	return m
}

// card finds a call's card by id.
func card(cards []results.Card, id string) (results.Card, bool) {
	for _, c := range cards {
		if c.CallID == id {
			return c, true
		}
	}
	return results.Card{}, false
}

func mustCard(t *testing.T, cards []results.Card, id string) results.Card {
	t.Helper()
	c, ok := card(cards, id)
	require.True(t, ok, "no card %s", id)
	return c
}

func tc(id, name, args string) results.ToolCall {
	return results.ToolCall{ID: id, Name: name, Arguments: args}
}

// toolLog records which tools ran, in order, with what.
type toolLog struct {
	mu   sync.Mutex
	runs []string
}

func (l *toolLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, s)
}

func (l *toolLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.runs...)
}

type textArgs struct {
	Text string `json:"text"`
}

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

type askArgs struct {
	Prompt string `json:"prompt"`
}

// testTools are small tools covering every outcome kind and every spec
// flag the workflow branches on.
func testTools(t *testing.T, log *toolLog, connected *sync.Map) []tool.Tool {
	t.Helper()
	echo := tool.MustFunc(tool.Spec{Name: "echo", Description: "Echo text.", Idempotent: true, Concurrent: true},
		func(_ context.Context, call tool.Call, a textArgs) (results.Outcome, error) {
			log.add("echo:" + a.Text)
			return results.SucceedText(a.Text), nil
		})
	write := tool.MustFunc(tool.Spec{Name: "write", Description: "Write a file.", Approval: tool.ApprovalAlways, Idempotent: true},
		func(_ context.Context, call tool.Call, a writeArgs) (results.Outcome, error) {
			log.add("write:" + a.Path + "=" + a.Content)
			return results.SucceedText("wrote " + a.Path), nil
		})
	step := tool.MustFunc(tool.Spec{Name: "step", Description: "A sequential step.", Idempotent: true},
		func(_ context.Context, call tool.Call, a textArgs) (results.Outcome, error) {
			log.add("step:" + a.Text)
			return results.SucceedText("did " + a.Text), nil
		})
	ask := tool.MustFunc(tool.Spec{Name: "ask", Description: "Ask the user to choose.", Idempotent: true, Concurrent: true},
		func(_ context.Context, call tool.Call, a askArgs) (results.Outcome, error) {
			if call.Resume == nil {
				return results.NeedChoice(a.Prompt, results.Option{ID: "formal"}, results.Option{ID: "casual"}), nil
			}
			var answer string
			if err := json.Unmarshal(call.Resume.Answer, &answer); err != nil {
				return results.Outcome{}, err
			}
			log.add("ask:" + answer)
			return results.SucceedText("the user chose " + answer), nil
		})
	issues := tool.MustFunc(tool.Spec{Name: "issues", Description: "List issues (needs a connection).", Idempotent: true, Concurrent: true},
		func(_ context.Context, call tool.Call, _ struct{}) (results.Outcome, error) {
			if _, ok := connected.Load("github"); !ok {
				return results.NeedConnection("github", "connect your code host account", "repo"), nil
			}
			log.add("issues")
			return results.SucceedText("#1 crash on start"), nil
		})
	handoff := tool.MustFunc(tool.Spec{Name: "handoff", Description: "Hand off.", Idempotent: true},
		func(_ context.Context, call tool.Call, a textArgs) (results.Outcome, error) {
			return results.TransferTo(a.Text, "over to you"), nil
		})
	boom := tool.MustFunc(tool.Spec{Name: "boom", Description: "Fails internally.", Idempotent: true, Concurrent: true},
		func(_ context.Context, call tool.Call, _ struct{}) (results.Outcome, error) {
			return results.Outcome{}, fmt.Errorf("database password=hunter2 rejected")
		})
	slow := tool.MustFunc(tool.Spec{Name: "slow", Description: "Runs until cancelled.", Concurrent: true, HeartbeatInterval: 100 * time.Millisecond},
		func(ctx context.Context, call tool.Call, _ struct{}) (results.Outcome, error) {
			log.add("slow:start")
			select {
			case <-ctx.Done():
				return results.Outcome{}, ctx.Err()
			case <-time.After(30 * time.Second):
				return results.SucceedText("finished"), nil
			}
		})
	// flaky fails transiently on its first attempt of each call; whether
	// it gets a second depends only on the idempotent flag.
	flaky := func(name string, idempotent bool) tool.Tool {
		var mu sync.Mutex
		attempts := map[string]int{}
		return tool.MustFunc(tool.Spec{Name: name, Description: "Fails once.", Idempotent: idempotent},
			func(_ context.Context, call tool.Call, _ struct{}) (results.Outcome, error) {
				mu.Lock()
				attempts[call.CallID]++
				n := attempts[call.CallID]
				mu.Unlock()
				log.add(fmt.Sprintf("%s:attempt%d", name, n))
				if n == 1 {
					return results.Outcome{}, tool.Retryable(fmt.Errorf("connection reset"))
				}
				return results.SucceedText("ok on attempt " + fmt.Sprint(n)), nil
			})
	}
	// draft previews the file it would write, for the approval card.
	draft, err := tool.FuncWithPreview(tool.Spec{Name: "draft", Description: "Draft a file.", Approval: tool.ApprovalAlways, Idempotent: true},
		func(_ context.Context, call tool.Call, args writeArgs) (results.Outcome, error) {
			log.add("draft:" + args.Path)
			return results.SucceedText("drafted"), nil
		},
		func(_ context.Context, call tool.Call, args writeArgs) ([]results.FileDiff, error) {
			if args.Path == "" {
				return nil, tool.WouldFail("draft needs a path")
			}
			return []results.FileDiff{{Path: args.Path, Diff: "+" + args.Content}}, nil
		})
	require.NoError(t, err)
	return []tool.Tool{echo, write, step, ask, issues, handoff, boom, slow, draft, flaky("flaky", true), flaky("flaky_once", false)}
}

type harness struct {
	env       *testsuite.TestWorkflowEnvironment
	model     *fakeModel
	log       *toolLog
	connected *sync.Map
	store     *transcript.Store
	// grants is the turn's grant store (grants_test.go).
	grants *grants.Memory
	reg    *tool.Registry
}

// testWorkerOptions: the SDK's deadlock detector fails a workflow task
// that runs 1s without yielding; on a loaded shared machine the first
// task of a test process (schemas compiled, caches filled) can take that
// long in wall time without any workflow code blocking.
var testWorkerOptions = worker.Options{DeadlockDetectionTimeout: 30 * time.Second}

func newHarness(t *testing.T, replies ...results.Message) *harness {
	t.Helper()
	return newHarnessWith(t, Features{}, replies...)
}

// newHarnessWith runs the turn as a deployment with features f would.
func newHarnessWith(t *testing.T, f Features, replies ...results.Message) *harness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(testWorkerOptions)
	env.SetStartTime(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	h := &harness{env: env, model: &fakeModel{replies: replies}, log: &toolLog{}, connected: &sync.Map{}, grants: &grants.Memory{}}
	reg, err := tool.NewRegistry(testTools(t, h.log, h.connected)...)
	require.NoError(t, err)
	h.reg = reg
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	h.store = store
	env.RegisterWorkflowWithOptions(f.AgentTurn, workflow.RegisterOptions{Name: WorkflowName})
	// "fake:model" has a price; "fake:unpriced" has none.
	prices := pricing.Default()
	require.NoError(t, prices.Merge([]byte(`{"fake:model": {"input": 1000, "output": 2000}}`)))
	env.RegisterActivity(&activities.Activities{Tools: reg, Models: h.model, Transcripts: store, Workspace: t.TempDir(), Prices: prices, Grants: h.grants})
	return h
}

func (h *harness) run(t *testing.T, in Input) Result {
	t.Helper()
	if in.Model == "" {
		in.Model = "fake:model"
	}
	h.env.ExecuteWorkflow(WorkflowName, in)
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())
	var res Result
	require.NoError(t, h.env.GetWorkflowResult(&res))
	return res
}

// respond sends the respond Update at delay and records how it ended.
func (h *harness) respond(delay time.Duration, r Response, got *updateOutcome) {
	h.env.RegisterDelayedCallback(func() { h.update(r, got) }, delay)
}

// respondTwice sends two updates back to back, before the workflow runs
// in between.
func (h *harness) respondTwice(delay time.Duration, a, b Response, gotA, gotB *updateOutcome) {
	h.env.RegisterDelayedCallback(func() {
		h.update(a, gotA)
		h.update(b, gotB)
	}, delay)
}

var updateSeq int

func (h *harness) update(r Response, got *updateOutcome) {
	updateSeq++
	h.updateArg(fmt.Sprintf("u-%s-%s-%d", r.CallID, r.Decision, updateSeq), r, got)
}

// updateArg sends any payload as a respond Update.
func (h *harness) updateArg(id string, arg any, got *updateOutcome) {
	h.env.UpdateWorkflow(RespondName, id, &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) {
			if got == nil {
				return
			}
			// Callers read the sentence and the kind, as tollgate.Client
			// and the gateway do.
			got.rejected = err
			var app *temporal.ApplicationError
			if errors.As(err, &app) {
				got.rejected, got.rejectedKind = errors.New(app.Message()), app.Type()
			}
		},
		OnComplete: func(v any, err error) {
			if got != nil {
				got.completed = true
				got.err = err
				if c, ok := v.(results.Card); ok {
					got.card = c
				}
			}
		},
	}, arg)
}

type updateOutcome struct {
	rejected     error
	rejectedKind string
	completed    bool
	err          error
	card         results.Card
}

func (h *harness) state(t *testing.T) State {
	t.Helper()
	v, err := h.env.QueryWorkflow(StateQuery)
	require.NoError(t, err)
	var s State
	require.NoError(t, v.Get(&s))
	return s
}

// toolTexts is the text and error flag of every tool message, in order.
func toolTexts(ms []results.Message) []string {
	var out []string
	for _, m := range ms {
		if m.Role == results.RoleTool {
			out = append(out, fmt.Sprintf("%s error=%v %s", m.ToolCallID, m.IsError, m.Text()))
		}
	}
	return out
}
