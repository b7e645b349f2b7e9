package workflows

import (
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/pricing"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/transcript"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/tool"
)

// agentModels gives each agent's model its own script: "fake:<agent>".
type agentModels map[string]*fakeModel

func (m agentModels) Resolve(name string) (model.Provider, string, error) {
	f, ok := m[name]
	if !ok {
		f = &fakeModel{}
	}
	return f, name, nil
}

const parentID = "parent"

// newAgentHarness runs turns on a worker with agents, each agent's model
// playing its script.
func newAgentHarness(t *testing.T, agents []Agent, scripts map[string][]results.Message) (*harness, agentModels) {
	t.Helper()
	return newAgentHarnessWith(t, Features{}, agents, scripts)
}

// newAgentHarnessWith is newAgentHarness with the worker's other features.
func newAgentHarnessWith(t *testing.T, f Features, agents []Agent, scripts map[string][]results.Message) (*harness, agentModels) {
	t.Helper()
	require.NoError(t, ValidateAgents(agents, nil))
	f.Agents = map[string]Agent{}
	for _, a := range agents {
		f.Agents[a.Name] = a
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(testWorkerOptions)
	env.SetStartTime(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: parentID})
	models := agentModels{}
	for name, replies := range scripts {
		models[name] = &fakeModel{replies: replies}
	}
	h := &harness{env: env, log: &toolLog{}, connected: &sync.Map{}}
	reg, err := tool.NewRegistry(testTools(t, h.log, h.connected)...)
	require.NoError(t, err)
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	env.RegisterWorkflowWithOptions(f.AgentTurn, workflow.RegisterOptions{Name: WorkflowName})
	prices := pricing.Default()
	require.NoError(t, prices.Merge([]byte(`{"fake:boss": {"input": 1000, "output": 2000}, "fake:researcher": {"input": 1000, "output": 2000}}`)))
	env.RegisterActivity(&activities.Activities{Tools: reg, Models: models, Transcripts: store, Workspace: t.TempDir(), Prices: prices})
	return h, models
}

func runTurn(t *testing.T, h *harness, in Input) Result {
	t.Helper()
	h.env.ExecuteWorkflow(WorkflowName, in)
	require.True(t, h.env.IsWorkflowCompleted())
	require.NoError(t, h.env.GetWorkflowError())
	var res Result
	require.NoError(t, h.env.GetWorkflowResult(&res))
	return res
}

var (
	boss       = Agent{Name: "boss", Instructions: "You delegate.", Model: "fake:boss", Tools: []string{"agent:researcher"}, Handoffs: []string{"billing"}}
	researcher = Agent{Name: "researcher", Description: "Finds facts.", Instructions: "You research.", Model: "fake:researcher", Tools: []string{"echo", "write"}}
	billing    = Agent{Name: "billing", Instructions: "You bill.", Model: "fake:billing", Tools: []string{"handoff"}}
)

// bossAsksResearcherToWrite is the scripts of the smallest chain with a
// wait below the top: boss calls researcher (call_1), whose write of x
// waits for approval; then researcher says "wrote it" and boss "done".
func bossAsksResearcherToWrite() map[string][]results.Message {
	return map[string][]results.Message{
		"fake:boss": {
			calls("", tc("call_1", "agent_researcher", `{"task":"a"}`)),
			calls("done"),
		},
		"fake:researcher": {
			calls("", tc("call_1", "write", `{"path":"x","content":"y"}`)),
			calls("wrote it"),
		},
	}
}

// approveInChild approves the call the top turn shows as id
// ("<call>/<child call>") with the respond Update at the child turn it
// routes to, as tollgate.Client does; a refusal fails the test.
func approveInChild(t *testing.T, h *harness, id string) {
	t.Helper()
	child, r := RouteResponse(parentID, Response{CallID: id, Decision: results.DecisionApprove, By: "ann"})
	require.NoError(t, h.env.UpdateWorkflowByID(child, RespondName, "u-"+id, &testsuite.TestUpdateCallback{
		OnAccept: func() {}, OnReject: func(err error) { t.Errorf("rejected: %v", err) }, OnComplete: func(any, error) {},
	}, r))
}

func TestAgentAsToolAnswersWithTheChildTurnsText(t *testing.T) {
	h, models := newAgentHarness(t, []Agent{boss, researcher, billing}, map[string][]results.Message{
		"fake:boss": {
			calls("", tc("call_1", "agent_researcher", `{"task":"find the fact"}`)),
			calls("the fact is in"),
		},
		"fake:researcher": {
			calls("", tc("call_1", "echo", `{"text":"fact"}`)),
			calls("the fact is 42"),
		},
	})
	res := runTurn(t, h, Input{Agent: "boss", Prompt: "go"})

	require.Equal(t, StatusCompleted, res.Status)
	c := mustCard(t, res.Cards, "call_1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, "the fact is 42", c.Output.Parts[0].Text)
	require.Equal(t, &results.AgentCall{Name: "researcher", Turn: "parent/call_1", Chain: []string{"boss", "researcher"}}, c.Agent)
	require.Equal(t, []string{"echo:fact"}, h.log.all())
	// The child's four model calls' tokens count into the parent's usage,
	// and its model and tool calls into what the budget sees.
	require.Equal(t, 40, res.Usage.InputTokens)
	require.Equal(t, 20, res.Usage.OutputTokens)
	require.InDelta(t, 4*(10*1000+5*2000)/1e6, res.Cost, 1e-9)
	// Each agent got its own instructions and only its own tools.
	boss := models["fake:boss"].requests[0]
	require.Equal(t, "You delegate.", boss.System)
	require.Equal(t, []string{"agent_researcher", "transfer_to_billing"}, toolNames(boss.Tools))
	child := models["fake:researcher"].requests[0]
	require.Equal(t, "You research.", child.System)
	require.Equal(t, "find the fact", child.Messages[len(child.Messages)-1].Text())
	require.Equal(t, []string{"echo", "write"}, toolNames(child.Tools))
}

func toolNames(defs []model.ToolDef) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Name)
	}
	return out
}

func TestAgentAsToolFailureIsAToolError(t *testing.T) {
	h, models := newAgentHarness(t, []Agent{boss, researcher, billing}, map[string][]results.Message{
		"fake:boss": {
			calls("", tc("call_1", "agent_researcher", `{"task":"find"}`)),
			calls("sorry"),
		},
	})
	models["fake:researcher"] = &fakeModel{failWith: map[int]string{0: "quota exceeded"}}
	res := runTurn(t, h, Input{Agent: "boss", Prompt: "go"})

	require.Equal(t, StatusCompleted, res.Status)
	c := mustCard(t, res.Cards, "call_1")
	require.Equal(t, results.StateFailed, c.State)
	require.Equal(t, results.FailureToolError, c.Failure.Reason)
	require.Contains(t, c.Failure.Message, "the agent researcher failed: the model call failed")
	require.Contains(t, c.Failure.Message, "quota exceeded")
	texts := toolTexts(res.Messages)
	require.Len(t, texts, 1)
	require.Contains(t, texts[0], "call_1 error=true")
	require.Contains(t, texts[0], "the agent researcher failed")
}

func TestAgentToolNamingNoAgentFailsTheTurnAtStart(t *testing.T) {
	h, _ := newAgentHarness(t, []Agent{boss, researcher, billing}, nil)
	h.env.ExecuteWorkflow(WorkflowName, Input{Prompt: "go", Model: "fake:boss", Tools: []string{"agent:nobody"}})
	require.ErrorContains(t, h.env.GetWorkflowError(), `tool "agent:nobody" names no agent this worker offers`)
}

func TestSubAgentsOfOneStepRunInParallelAndWaitsSurfaceInTheParent(t *testing.T) {
	h, _ := newAgentHarness(t, []Agent{boss, researcher, billing}, map[string][]results.Message{
		"fake:boss": {
			calls("", tc("call_1", "agent_researcher", `{"task":"a"}`), tc("call_2", "agent_researcher", `{"task":"b"}`)),
			calls("both done"),
		},
		"fake:researcher": {
			calls("", tc("call_1", "write", `{"path":"x","content":"y"}`)),
			calls("wrote it"),
		},
	})
	var during State
	h.env.RegisterDelayedCallback(func() {
		during = h.state(t)
		for _, id := range []string{"call_1/call_1", "call_2/call_1"} {
			approveInChild(t, h, id)
		}
	}, time.Minute)
	res := runTurn(t, h, Input{Agent: "boss", Prompt: "go"})

	// Both children were waiting at once: they ran side by side.
	require.Equal(t, StatusWaiting, during.Status)
	for _, id := range []string{"call_1", "call_2"} {
		c := mustCard(t, during.Cards, id)
		require.Equal(t, results.StateRunning, c.State)
		require.Len(t, c.Agent.Waiting, 1)
		w := c.Agent.Waiting[0]
		require.Equal(t, id+"/call_1", w.CallID)
		require.Equal(t, results.StatePendingApproval, w.State)
		require.Equal(t, "write", w.Tool)
		require.Equal(t, "parent/"+id, c.Agent.Turn)
	}
	require.Equal(t, StatusCompleted, res.Status)
	for _, id := range []string{"call_1", "call_2"} {
		c := mustCard(t, res.Cards, id)
		require.Equal(t, results.StateSucceeded, c.State)
		require.Equal(t, "wrote it", c.Output.Parts[0].Text)
		require.Empty(t, c.Agent.Waiting)
	}
	require.Equal(t, []string{"write:x=y", "write:x=y"}, h.log.all())
}

// A called agent's live events name its caller, and the calling turn's
// stream carries the child's wait on the calling card as it comes and
// goes.
func TestAChildsLiveEventsNameItsCallerAndTheParentStreamsItsWait(t *testing.T) {
	events := &eventLog{}
	h, _ := newAgentHarnessWith(t, Features{Events: events}, []Agent{boss, researcher, billing}, bossAsksResearcherToWrite())
	h.env.RegisterDelayedCallback(func() {
		approveInChild(t, h, "call_1/call_1")
	}, time.Minute)
	res := runTurn(t, h, Input{Agent: "boss", Prompt: "go"})
	require.Equal(t, StatusCompleted, res.Status, res.Error)

	var parentWaits []int
	childEvents := 0
	for _, ev := range events.of(stream.TypeCard) {
		switch ev.Turn {
		case parentID:
			require.Empty(t, ev.Parent)
			if ev.Card.CallID == "call_1" && ev.Card.State == results.StateRunning && ev.Card.Agent != nil {
				parentWaits = append(parentWaits, len(ev.Card.Agent.Waiting))
			}
		case parentID + "/call_1":
			childEvents++
			require.Equal(t, parentID, ev.Parent)
			require.Equal(t, "call_1", ev.ParentCall)
			require.Empty(t, ev.Session, "a called agent's turn is no session's")
		}
	}
	require.Positive(t, childEvents)
	i := slices.Index(parentWaits, 1)
	require.GreaterOrEqual(t, i, 0, "the calling card is published when the child's wait comes: %v", parentWaits)
	require.Contains(t, parentWaits[i:], 0, "and when it goes: %v", parentWaits)
}

func TestTheParentPointsAResponseForAChildCallAtTheChild(t *testing.T) {
	h, _ := newAgentHarness(t, []Agent{boss, researcher, billing}, bossAsksResearcherToWrite())
	var atParent, atChild updateOutcome
	h.env.RegisterDelayedCallback(func() {
		r := Response{CallID: "call_1/call_1", Decision: results.DecisionDeny, Reason: "no", By: "ann"}
		h.update(r, &atParent)
		child, routed := RouteResponse(parentID, r)
		require.Equal(t, "parent/call_1", child)
		require.Equal(t, "call_1", routed.CallID)
		require.NoError(t, h.env.UpdateWorkflowByID(child, RespondName, "u-child", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { atChild.rejected = err },
			OnComplete: func(v any, err error) {
				atChild.completed, atChild.err = true, err
			},
		}, routed))
	}, time.Minute)
	res := runTurn(t, h, Input{Agent: "boss", Prompt: "go"})

	require.ErrorContains(t, atParent.rejected, `call "call_1/call_1" waits in the agent turn parent/call_1`)
	require.Equal(t, ErrTypeUnknownCall, atParent.rejectedKind)
	require.True(t, atChild.completed)
	require.NoError(t, atChild.err)
	require.Empty(t, h.log.all(), "the denied write never ran")
	require.Equal(t, results.StateSucceeded, mustCard(t, res.Cards, "call_1").State)
}

func TestCancellingTheParentCancelsItsChildren(t *testing.T) {
	h, _ := newAgentHarness(t, []Agent{boss, researcher, billing}, map[string][]results.Message{
		"fake:boss": {
			calls("", tc("call_1", "agent_researcher", `{"task":"a"}`)),
		},
		"fake:researcher": {
			calls("", tc("call_1", "write", `{"path":"x","content":"y"}`), tc("call_2", "echo", `{"text":"z"}`)),
		},
	})
	h.env.RegisterDelayedCallback(func() { h.env.CancelWorkflow() }, time.Minute)
	res := runTurn(t, h, Input{Agent: "boss", Prompt: "go"})

	require.Equal(t, StatusCancelled, res.Status)
	c := mustCard(t, res.Cards, "call_1")
	require.Equal(t, results.StateFailed, c.State)
	require.Equal(t, "the turn was cancelled while the agent researcher worked on this call; it was stopped", c.Failure.Message)
	// The child answered its own calls: the waiting write was cancelled.
	v, err := h.env.QueryWorkflowByID("parent/call_1", StateQuery)
	require.NoError(t, err)
	var child State
	require.NoError(t, v.Get(&child))
	require.Equal(t, StatusCancelled, child.Status)
	for _, card := range child.Cards {
		require.True(t, card.State.Final(), "call %s is %s", card.CallID, card.State)
	}
	require.Equal(t, results.StateRefused, mustCard(t, child.Cards, "call_1").State)
}

// receivingChildWaits counts the goroutines blocked in receiveChildWaits.
func receivingChildWaits() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "workflows.(*turn).receiveChildWaits")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// settledChildWaits is receivingChildWaits once earlier tests' turns have
// stopped exiting: the SDK ends a finished workflow's coroutines on a
// goroutine of its own, after the test that ran it has returned.
func settledChildWaits() int {
	n, same := receivingChildWaits(), 0
	for deadline := time.Now().Add(2 * time.Second); same < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if m := receivingChildWaits(); m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

// A turn that cannot call an agent does not keep a coroutine for child
// turns' waits while it is parked; the same turn recorded at the version
// before still runs one, as it did.
func TestOnlyATurnThatCallsAgentsReceivesChildWaits(t *testing.T) {
	for _, c := range []struct {
		name string
		v    workflow.Version
		want int
	}{
		{"latest", latestTurnVersion, 0},
		{"before childWaitsVersion", childWaitsVersion - 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t,
				calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
				results.AssistantText("written"))
			h.env.OnGetVersion(hardeningChange, workflow.DefaultVersion, latestTurnVersion).Return(c.v)
			before, parked := settledChildWaits(), -1
			h.env.RegisterDelayedCallback(func() {
				require.Equal(t, StatusWaiting, h.state(t).Status)
				parked = receivingChildWaits()
			}, time.Minute)
			h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "ann"}, nil)
			res := h.run(t, Input{Prompt: "write it", Tools: []string{"write"}})
			require.Equal(t, StatusCompleted, res.Status)
			require.Equal(t, c.want, parked-before)
		})
	}
}

func TestNamedAgentHandsOffOnlyToItsHandoffs(t *testing.T) {
	h, _ := newAgentHarness(t, []Agent{boss, researcher, billing}, map[string][]results.Message{
		"fake:billing": {
			calls("", tc("call_1", "handoff", `{"text":"nobody"}`)),
			calls("I will answer myself"),
		},
	})
	res := runTurn(t, h, Input{Agent: "billing", Prompt: "refund"})
	require.Equal(t, StatusCompleted, res.Status)
	c := mustCard(t, res.Cards, "call_1")
	require.Equal(t, results.FailureToolError, c.Failure.Reason)
	require.Equal(t, `the agent billing hands off to no agent, so the transfer to "nobody" did not happen; answer yourself`, c.Failure.Message)
}

func TestHandoffToolTransfersTheTurn(t *testing.T) {
	h, _ := newAgentHarness(t, []Agent{boss, researcher, billing}, map[string][]results.Message{
		"fake:boss": {
			calls("", tc("call_1", "transfer_to_billing", `{"message":"a refund","now":true}`)),
		},
	})
	res := runTurn(t, h, Input{Agent: "boss", Prompt: "refund please"})
	require.Equal(t, StatusTransferred, res.Status)
	require.Equal(t, &results.Transfer{Target: "billing", Message: "a refund", Now: true}, res.Transfer)
}

func TestAgentInputFieldsNarrowButNeverWiden(t *testing.T) {
	in, err := mergeAgent(Input{Agent: "researcher", System: "Be brief.", Tools: []string{"echo"}, Policy: Policy{Approval: map[string]string{"echo": "always"}}}, []Agent{researcher})
	require.NoError(t, err)
	require.Equal(t, "fake:researcher", in.Model)
	require.Equal(t, "You research.\n\nBe brief.", in.System)
	require.Equal(t, []string{"echo"}, in.Tools)
	require.Equal(t, "always", in.Policy.Approval["echo"])
	require.Equal(t, &Resolved{Agent: "researcher"}, in.Resolved)

	_, err = mergeAgent(Input{Agent: "researcher", Tools: []string{"echo", "shell"}}, []Agent{researcher})
	require.EqualError(t, err, `tools[1] "shell" is not a tool of agent "researcher", whose tools are: echo, write`)

	strict := researcher
	strict.Policy = Policy{Approval: map[string]string{"write": "always"}}
	in, err = mergeAgent(Input{Agent: "researcher", Policy: Policy{Approval: map[string]string{"write": "never"}}}, []Agent{strict})
	require.NoError(t, err)
	require.Equal(t, "always", in.Policy.Approval["write"], "an input cannot lower the agent's approval")
}

func TestValidateAgentsNamesTheBadField(t *testing.T) {
	bad := billing
	bad.Tools = []string{"handoff", "echo", "agent:nobody"}
	require.EqualError(t, ValidateAgents([]Agent{boss, researcher, bad}, nil), `agent "billing": tools[2] "agent:nobody" names no agent`)
	noModel := researcher
	noModel.Model = ""
	require.ErrorContains(t, ValidateAgents([]Agent{noModel}, nil), `agent "researcher": model is empty`)
	require.EqualError(t, ValidateAgents([]Agent{{Name: "a b", Model: "x:y"}}, nil), `agents[0]: name "a b" must be 1 to 48 letters, digits, _ or -`)
	require.EqualError(t, ValidateAgents([]Agent{boss, researcher}, nil), `agent "boss": handoffs[0] "billing" names no agent`)
	require.EqualError(t, ValidateAgents([]Agent{researcher}, func(name string) bool { return name == "echo" }), `agent "researcher": tools[1] "write" is not a tool this worker offers`)
	require.True(t, strings.HasPrefix(agentTool("x"), "agent_"))
}

func TestRouteResponseFollowsTheCallChain(t *testing.T) {
	turn, r := RouteResponse("t1", Response{CallID: "call_1/call_2/call_3", Decision: results.DecisionApprove})
	require.Equal(t, "t1/call_1/call_2", turn)
	require.Equal(t, "call_3", r.CallID)
	turn, r = RouteResponse("t1", Response{CallID: "call_1"})
	require.Equal(t, "t1", turn)
	require.Equal(t, "call_1", r.CallID)
	turn, _ = RouteResponse("t1", Response{CallID: "/x"})
	require.Equal(t, "t1", turn, "an id the turn never gives stays the turn's, to be refused there")
}

// newAgentSessionHarness runs AgentSession with child turns of agents,
// each agent's model playing its script.
func newAgentSessionHarness(t *testing.T, agents []Agent, scripts map[string][]results.Message) (*sessionHarness, agentModels) {
	t.Helper()
	f := Features{Agents: map[string]Agent{}}
	for _, a := range agents {
		f.Agents[a.Name] = a
	}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(testWorkerOptions)
	env.SetStartTime(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: sessionID})
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	models := agentModels{}
	for name, replies := range scripts {
		models[name] = &fakeModel{replies: replies}
	}
	h := &sessionHarness{t: t, env: env, store: store, log: &toolLog{}, turns: map[string]Result{}}
	reg, err := tool.NewRegistry(testTools(t, h.log, &sync.Map{})...)
	require.NoError(t, err)
	env.RegisterWorkflowWithOptions(f.AgentTurn, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterWorkflowWithOptions(f.AgentSession, workflow.RegisterOptions{Name: SessionWorkflowName})
	env.RegisterActivity(&activities.Activities{Tools: reg, Models: models, Transcripts: store, Workspace: t.TempDir()})
	return h, models
}

func TestSessionHandsTheConversationToTheTransferTarget(t *testing.T) {
	triage := Agent{Name: "triage", Instructions: "You route.", Model: "fake:triage", Handoffs: []string{"billing"}}
	billing := Agent{Name: "billing", Instructions: "You bill.", Model: "fake:billing", Tools: []string{"echo"}}
	h, models := newAgentSessionHarness(t, []Agent{triage, billing}, map[string][]results.Message{
		"fake:triage": {calls("", tc("call_1", "transfer_to_billing", `{"message":"a refund","now":true}`))},
		// Reply i answers a conversation holding i assistant messages: the
		// first is triage's transfer.
		"fake:billing": {{}, calls("Refunded order 7."), calls("You are welcome.")},
	})
	var first, second, ended sendOutcome
	h.send(time.Second, "refund order 7", &first)
	h.send(time.Hour, "thanks", &second)
	h.end(2*time.Hour, End{By: "ada"}, &ended)
	// Not h.run: it gives a turn without a model the fake one.
	h.env.ExecuteWorkflow(SessionWorkflowName, SessionInput{Turn: Input{Agent: "triage"}})
	require.NoError(t, h.env.GetWorkflowError())
	var res SessionResult
	require.NoError(t, h.env.GetWorkflowResult(&res))

	require.NoError(t, first.err)
	require.NoError(t, second.err)
	require.Equal(t, SessionEnded, res.Status, "a handoff keeps the session open")
	require.Equal(t, "billing", res.Agent)
	require.Len(t, res.Holders, 2)
	require.Equal(t, "triage", res.Holders[0].Agent)
	require.Equal(t, AgentHold{Agent: "billing", Since: res.Holders[1].Since, From: "triage", Turn: "chat/turn-1", Message: "a refund", Now: true}, res.Holders[1])
	require.Len(t, res.Turns, 3)
	require.Equal(t, []string{"triage", "billing", "billing"}, []string{res.Turns[0].Agent, res.Turns[1].Agent, res.Turns[2].Agent})
	require.Equal(t, StatusTransferred, res.Turns[0].Status)
	require.Equal(t, "chat/turn-2", res.Turns[1].ID, "the target took over at once, without a message")
	require.Equal(t, "Refunded order 7.", res.Turns[1].Reply)
	require.Equal(t, "thanks", res.Turns[2].Text)
	require.Equal(t, "You are welcome.", res.Turns[2].Reply)

	// Billing ran with its own instructions and tools, and saw the
	// handoff confirmed in the conversation.
	req := models["fake:billing"].requests[0]
	require.Equal(t, "You bill.", req.System)
	require.Equal(t, []string{"echo"}, toolNames(req.Tools))
	last := req.Messages[len(req.Messages)-1]
	require.Equal(t, results.RoleTool, last.Role)
	require.Contains(t, last.Text(), "Transferred the conversation to billing")
}

func TestSessionWithoutAgentsStillEndsOnATransfer(t *testing.T) {
	h := newSessionHarness(t, calls("", tc("call_1", "handoff", `{"text":"billing"}`)))
	var sent sendOutcome
	h.send(time.Second, "refund", &sent)
	res := h.run(SessionInput{Turn: Input{Tools: []string{"handoff"}}})
	require.Equal(t, SessionTransferred, res.Status)
	require.Equal(t, "billing", res.Transfer.Target)
	require.Empty(t, res.Agent)
}

func TestAnAgentCannotCallItselfBackThroughAnother(t *testing.T) {
	ping := Agent{Name: "ping", Model: "fake:ping", Tools: []string{"agent:pong"}}
	pong := Agent{Name: "pong", Model: "fake:pong", Tools: []string{"agent:ping"}}
	h, _ := newAgentHarness(t, []Agent{ping, pong}, map[string][]results.Message{
		"fake:ping": {calls("", tc("call_1", "agent_pong", `{"task":"bounce"}`)), calls("ping done")},
		"fake:pong": {calls("", tc("call_1", "agent_ping", `{"task":"bounce back"}`)), calls("pong done")},
	})
	res := runTurn(t, h, Input{Agent: "ping", Prompt: "go"})
	require.Equal(t, StatusCompleted, res.Status)
	require.Equal(t, "pong done", mustCard(t, res.Cards, "call_1").Output.Parts[0].Text)
	v, err := h.env.QueryWorkflowByID("parent/call_1", StateQuery)
	require.NoError(t, err)
	var child State
	require.NoError(t, v.Get(&child))
	loop := mustCard(t, child.Cards, "call_1")
	require.Equal(t, results.StateFailed, loop.State)
	require.Equal(t, "the agent ping is already working on this task further up (ping → pong), so it cannot be called again from here; answer with what you have", loop.Failure.Message)
}

func TestWhatAChildAgentUsesCountsAgainstTheCallersBudget(t *testing.T) {
	h, models := newAgentHarness(t, []Agent{boss, researcher, billing}, map[string][]results.Message{
		"fake:boss": {
			calls("", tc("call_1", "agent_researcher", `{"task":"find"}`)),
			calls("never asked"),
		},
		"fake:researcher": {
			calls("", tc("call_1", "echo", `{"text":"fact"}`)),
			calls("the fact"),
		},
	})
	// The boss's own call uses 15 tokens and 1 model call; the child's
	// two add 30 and 2, which reach the budget of 3 model calls.
	res := runTurn(t, h, Input{Agent: "boss", Prompt: "go", Policy: Policy{Budget: Budget{ModelCalls: 3}, OnBudget: OnBudgetStop}})
	require.Equal(t, StatusBudgetExhausted, res.Status)
	require.Contains(t, res.Error, "3 of 3 model calls")
	require.Len(t, models["fake:boss"].requests, 1, "the boss was not called again")
	require.Equal(t, 45, res.Usage.InputTokens+res.Usage.OutputTokens)
	require.Equal(t, 2, res.Budget.Spent.ToolCalls, "the boss's call and the child's")
}

// A called agent gets what its caller has left of its budget, and the
// caller's on_budget: it cannot spend past its caller's limit.
func TestAChildAgentSpendsNoMoreThanItsCallerHasLeft(t *testing.T) {
	h, models := newAgentHarness(t, []Agent{boss, researcher, billing}, map[string][]results.Message{
		"fake:boss": {
			calls("", tc("call_1", "agent_researcher", `{"task":"find"}`)),
			calls("never asked"),
		},
		"fake:researcher": {
			calls("", tc("call_1", "echo", `{"text":"fact"}`)),
			calls("never asked either"),
		},
	})
	// The boss's own model call leaves one of three to the child.
	res := runTurn(t, h, Input{Agent: "boss", Prompt: "go", Policy: Policy{Budget: Budget{ModelCalls: 2, Tokens: 1000}, OnBudget: OnBudgetStop}})
	require.Equal(t, StatusBudgetExhausted, res.Status)
	require.Len(t, models["fake:researcher"].requests, 1, "the child stopped at the one model call it was given")
	require.Len(t, models["fake:boss"].requests, 1)
	c := mustCard(t, res.Cards, "call_1")
	require.Equal(t, results.StateFailed, c.State)
	require.Contains(t, c.Failure.Message, "budget_exhausted")
}

// A caller whose budget is already spent does not start the agent: the
// call is a tool error that says so.
func TestACallerWithNoBudgetLeftDoesNotCallTheAgent(t *testing.T) {
	h, models := newAgentHarness(t, []Agent{boss, researcher, billing}, map[string][]results.Message{
		"fake:boss":       {calls("", tc("call_1", "agent_researcher", `{"task":"find"}`))},
		"fake:researcher": {calls("never asked")},
	})
	// The boss's first model call uses 15 tokens of 10.
	res := runTurn(t, h, Input{Agent: "boss", Prompt: "go", Policy: Policy{Budget: Budget{Tokens: 10}, OnBudget: OnBudgetStop}})
	require.Equal(t, StatusBudgetExhausted, res.Status)
	c := mustCard(t, res.Cards, "call_1")
	require.Equal(t, results.StateFailed, c.State)
	require.Contains(t, c.Failure.Message, "the budget is spent (15 of 10 tokens), so the agent researcher was not called")
	require.Empty(t, models["fake:researcher"].requests, "the child never ran")
}

func TestARespondSignalToTheParentReachesTheChild(t *testing.T) {
	h, _ := newAgentHarness(t, []Agent{boss, researcher, billing}, bossAsksResearcherToWrite())
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(RespondName, Response{CallID: "call_1/call_1", Decision: results.DecisionApprove, By: "ann"})
	}, time.Minute)
	res := runTurn(t, h, Input{Agent: "boss", Prompt: "go"})
	require.Equal(t, StatusCompleted, res.Status)
	require.Zero(t, res.InvalidSignals)
	require.Equal(t, "wrote it", mustCard(t, res.Cards, "call_1").Output.Parts[0].Text)
	require.Equal(t, []string{"write:x=y"}, h.log.all())
}
