package workflows

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/results"
)

func TestFinalAnswerWithoutTools(t *testing.T) {
	h := newHarness(t, results.AssistantText("hello there"))
	res := h.run(t, Input{Prompt: "hi", System: "be brief"})

	require.Equal(t, StatusCompleted, res.Status)
	require.Equal(t, "hello there", res.Text)
	require.Equal(t, 1, res.Steps)
	require.Equal(t, []results.Message{results.UserText("hi"), results.AssistantText("hello there")}, res.Messages)
	require.Equal(t, "be brief", h.model.requests[0].System)
}

func TestToolsThatNeedNobodyRunAndAnswerInCallOrder(t *testing.T) {
	h := newHarness(t,
		calls("looking", tc("a", "echo", `{"text":"one"}`), tc("b", "step", `{"text":"two"}`), tc("c", "echo", `{"text":"three"}`)),
		results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "go", Tools: []string{"echo", "step"}})

	require.Equal(t, StatusCompleted, res.Status)
	require.ElementsMatch(t, []string{"echo:one", "step:two", "echo:three"}, h.log.all())
	require.Equal(t, []string{
		"a error=false one",
		"b error=false did two",
		"c error=false three",
	}, toolTexts(h.model.last()))
	require.Len(t, h.model.requests[1].Messages, 5, "the model sees the whole conversation")
	require.Len(t, res.Cards, 3)
	for _, c := range res.Cards {
		require.Equal(t, results.StateSucceeded, c.State)
	}
}

func TestNoToolRunsBeforeApprovalAndApproveRunsIt(t *testing.T) {
	h := newHarness(t,
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		results.AssistantText("written"))
	var before State
	var up updateOutcome
	h.env.RegisterDelayedCallback(func() { before = h.state(t) }, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice"}, &up)
	res := h.run(t, Input{Prompt: "write it", Tools: []string{"write"}})

	require.Equal(t, StatusWaiting, before.Status)
	require.Equal(t, results.StatePendingApproval, before.Cards[0].State)
	require.Equal(t, []string{"write:a.md=x"}, h.log.all())
	require.NoError(t, up.rejected)
	require.True(t, up.completed)
	require.Equal(t, results.StateRunning, up.card.State)

	c := res.Cards[0]
	require.Equal(t, results.StateSucceeded, c.State)
	require.Len(t, c.Decisions, 1)
	require.Equal(t, results.DecisionApprove, c.Decisions[0].Decision)
	require.Equal(t, "alice", c.Decisions[0].By)
	require.Equal(t, time.Date(2026, 11, 30, 9, 2, 0, 0, time.UTC), c.Decisions[0].At.UTC())
	require.Equal(t, []string{"w1 error=false wrote a.md"}, toolTexts(h.model.last()))
}

func TestDenyRefusesAndTellsTheModelNotToRetry(t *testing.T) {
	h := newHarness(t,
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`)),
		results.AssistantText("ok, not writing"))
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionDeny, Reason: "not that file", By: "bob"}, nil)
	res := h.run(t, Input{Prompt: "write it", Tools: []string{"write"}})

	require.Empty(t, h.log.all(), "a denied call never runs")
	require.Equal(t, results.StateRefused, res.Cards[0].State)
	require.Equal(t, "not that file", res.Cards[0].Reason)
	msgs := toolTexts(h.model.last())
	require.Len(t, msgs, 1)
	require.Contains(t, msgs[0], "w1 error=true")
	require.Contains(t, msgs[0], "not that file")
	require.Contains(t, msgs[0], "Do not retry the same call")
}

func TestApprovalPolicyIsAFloor(t *testing.T) {
	for _, tt := range []struct {
		name   string
		policy map[string]string
		call   results.ToolCall
		asks   bool
	}{
		{"worker default always cannot be lowered", map[string]string{"write": "never"}, tc("c1", "write", `{"path":"p","content":"c"}`), true},
		{"wildcard cannot lower either", map[string]string{"*": "never"}, tc("c1", "write", `{"path":"p","content":"c"}`), true},
		{"turn raises a never tool", map[string]string{"echo": "always"}, tc("c1", "echo", `{"text":"t"}`), true},
		{"wildcard raises every tool", map[string]string{"*": "always"}, tc("c1", "echo", `{"text":"t"}`), true},
		{"default never runs at once", nil, tc("c1", "echo", `{"text":"t"}`), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t,
				calls("", tt.call),
				results.AssistantText("done"))
			var mid State
			h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, time.Minute)
			h.respond(2*time.Minute, Response{CallID: "c1", Decision: results.DecisionApprove}, nil)
			res := h.run(t, Input{Prompt: "p", Tools: []string{"echo", "write"}, Policy: Policy{Approval: tt.policy}})
			require.Equal(t, StatusCompleted, res.Status)
			if tt.asks {
				require.Equal(t, results.StatePendingApproval, mid.Cards[0].State)
				require.Len(t, res.Cards[0].Decisions, 1)
			} else {
				require.Empty(t, res.Cards[0].Decisions)
			}
		})
	}
}

func TestApproveWithEditedArguments(t *testing.T) {
	h := newHarness(t,
		calls("", tc("w1", "write", `{"path":"a.md","content":"draft"}`)),
		results.AssistantText("done"))
	var bad, good updateOutcome
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, Arguments: json.RawMessage(`{"path":3}`)}, &bad)
	h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, Arguments: json.RawMessage(`{"path": "a.md", "content": "final"}`), By: "carol"}, &good)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

	require.ErrorContains(t, bad.rejected, "edited arguments for call w1 do not validate")
	require.NoError(t, good.rejected)
	require.Equal(t, []string{"write:a.md=final"}, h.log.all())
	c := res.Cards[0]
	require.JSONEq(t, `{"path":"a.md","content":"draft"}`, string(c.Arguments))
	require.JSONEq(t, `{"path":"a.md","content":"final"}`, string(c.EditedArguments))
	require.Len(t, c.Decisions, 1, "the rejected update left no trace")
	msgs := toolTexts(h.model.last())
	require.Contains(t, msgs[0], "a person edited the arguments")
	require.Contains(t, msgs[0], `"content":"final"`)
}

func TestSeveralWaitsAnsweredInReverseOrderWhileOthersRun(t *testing.T) {
	h := newHarness(t,
		calls("",
			tc("w1", "write", `{"path":"1","content":"a"}`),
			tc("s1", "step", `{"text":"first"}`),
			tc("w2", "write", `{"path":"2","content":"b"}`),
			tc("s2", "step", `{"text":"second"}`),
			tc("e1", "echo", `{"text":"par"}`)),
		results.AssistantText("all done"))
	var mid State
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "w2", Decision: results.DecisionApprove}, nil)
	h.respond(3*time.Minute, Response{CallID: "w1", Decision: results.DecisionDeny, Reason: "no"}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write", "step", "echo"}})

	// While both writes waited, the calls that needed nobody had run; the
	// sequential ones in call order.
	require.Equal(t, []results.State{results.StatePendingApproval, results.StateSucceeded, results.StatePendingApproval, results.StateSucceeded, results.StateSucceeded}, cardStates(mid.Cards))
	runs := h.log.all()
	require.Less(t, indexOf(runs, "step:first"), indexOf(runs, "step:second"))
	require.Equal(t, "write:2=b", runs[len(runs)-1])
	require.Equal(t, []string{
		"w1 error=true " + errorText(results.RefusedText("no")),
		"s1 error=false did first",
		"w2 error=false wrote 2",
		"s2 error=false did second",
		"e1 error=false par",
	}, toolTexts(h.model.last()))
	require.Equal(t, StatusCompleted, res.Status)
}

func TestChoiceInterruptAnswered(t *testing.T) {
	h := newHarness(t,
		calls("", tc("q1", "ask", `{"prompt":"Which tone?"}`)),
		results.AssistantText("writing casually"))
	var wrong, second updateOutcome
	var mid State
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "q1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"sarcastic"`)}, &wrong)
	h.respond(3*time.Minute, Response{CallID: "q1", Decision: results.DecisionApprove}, &wrong)
	// A second answer to the same wait, right behind the first.
	h.respondTwice(4*time.Minute,
		Response{CallID: "q1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"casual"`), By: "dan"},
		Response{CallID: "q1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"formal"`)},
		nil, &second)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"ask"}})

	require.Equal(t, results.StateWaitingAnswer, mid.Cards[0].State)
	require.Equal(t, "Which tone?", mid.Cards[0].Interrupt.Prompt)
	require.ErrorContains(t, wrong.rejected, "does not fit that wait")
	require.EqualError(t, second.rejected, "call q1 is running, not waiting for a response (it got answer from dan)")
	require.Equal(t, ErrTypeNotWaiting, second.rejectedKind)
	require.Equal(t, []string{"ask:casual"}, h.log.all())
	require.Equal(t, []string{"q1 error=false the user chose casual"}, toolTexts(h.model.last()))
	require.Equal(t, StatusCompleted, res.Status)
}

func TestChoiceRejectsUnknownOption(t *testing.T) {
	h := newHarness(t, calls("", tc("q1", "ask", `{"prompt":"Which?"}`)), results.AssistantText("ok"))
	var wrong updateOutcome
	h.respond(time.Minute, Response{CallID: "q1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"sarcastic"`)}, &wrong)
	h.respond(2*time.Minute, Response{CallID: "q1", Decision: results.DecisionCancel, Reason: "never mind"}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"ask"}})
	require.EqualError(t, wrong.rejected, `"sarcastic" is not one of the options: formal, casual`)
	require.Equal(t, results.StateRefused, res.Cards[0].State)
	require.Equal(t, "never mind", res.Cards[0].Reason)
}

func TestConnectionRequiredThenConnected(t *testing.T) {
	h := newHarness(t, calls("", tc("i1", "issues", `{}`)), results.AssistantText("one issue"))
	var mid State
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, time.Minute)
	h.env.RegisterDelayedCallback(func() { h.connected.Store("github", true) }, 90*time.Second)
	h.respond(2*time.Minute, Response{CallID: "i1", Decision: results.DecisionConnected, By: "erin"}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"issues"}})

	require.Equal(t, results.StateWaitingConnection, mid.Cards[0].State)
	require.Equal(t, "github", mid.Cards[0].Connection.Provider)
	require.Equal(t, []string{"issues"}, h.log.all())
	require.Equal(t, []string{"i1 error=false #1 crash on start"}, toolTexts(h.model.last()))
	require.Equal(t, StatusCompleted, res.Status)
}

func TestConnectionDeclinedIsAToolError(t *testing.T) {
	h := newHarness(t, calls("", tc("i1", "issues", `{}`)), results.AssistantText("cannot list"))
	h.respond(time.Minute, Response{CallID: "i1", Decision: results.DecisionCancel, Reason: "no account"}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"issues"}})

	c := res.Cards[0]
	require.Equal(t, results.StateFailed, c.State)
	require.Equal(t, results.FailureToolError, c.Failure.Reason)
	require.Equal(t, []string{"i1 error=true " + errorText("the user did not connect github (no account), so the tool did not run")}, toolTexts(h.model.last()))
}

func TestResponseTimeoutDenies(t *testing.T) {
	h := newHarness(t, calls("", tc("w1", "write", `{"path":"a","content":"b"}`)), results.AssistantText("gave up"))
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}, Policy: Policy{ResponseTimeout: Duration(90 * time.Minute), OnTimeout: OnTimeoutDeny}})

	c := res.Cards[0]
	require.Equal(t, results.StateRefused, c.State)
	require.Equal(t, "no response within 1h30m", c.Reason)
	require.Equal(t, results.DecisionTimeout, c.Decisions[0].Decision)
	require.Equal(t, time.Date(2026, 11, 30, 10, 30, 0, 0, time.UTC), c.Decisions[0].At.UTC())
	require.Empty(t, h.log.all())
}

func TestDefaultResponseTimeoutIs24h(t *testing.T) {
	h := newHarness(t, calls("", tc("w1", "write", `{"path":"a","content":"b"}`)), results.AssistantText("gave up"))
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})
	require.Equal(t, "no response within 24h", res.Cards[0].Reason)
}

func TestCancelRefusesWaitsAndStopsRunningTools(t *testing.T) {
	h := newHarness(t, calls("", tc("w1", "write", `{"path":"a","content":"b"}`), tc("s1", "slow", `{}`)))
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Second)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write", "slow"}})

	require.Equal(t, StatusCancelled, res.Status)
	require.Equal(t, results.StateRefused, res.Cards[0].State)
	require.Equal(t, "the turn was cancelled while this call waited", res.Cards[0].Reason)
	require.Equal(t, results.StateFailed, res.Cards[1].State)
	require.Contains(t, res.Cards[1].Failure.Message, "cancelled while this tool ran")
	// Every call is answered in the result's messages.
	require.Len(t, toolTexts(res.Messages), 2)
}

func TestTransferEndsTheTurn(t *testing.T) {
	h := newHarness(t, calls("handing off", tc("h1", "handoff", `{"text":"billing"}`)))
	res := h.run(t, Input{Prompt: "refund please", Tools: []string{"handoff"}})
	require.Equal(t, StatusTransferred, res.Status)
	require.Equal(t, "billing", res.Transfer.Target)
	require.Equal(t, "handing off", res.Text)
	require.Equal(t, []string{"h1 error=false Transferred the conversation to billing."}, toolTexts(res.Messages))
	require.Len(t, h.model.requests, 1, "no model call after a transfer")
}

func TestNonIdempotentWorkerLostIsOutcomeUnknown(t *testing.T) {
	h := newHarness(t, calls("", tc("s1", "slow", `{}`)), results.AssistantText("hmm"))
	h.env.OnActivity(activities.RunToolName, mockAny, mockAny).Return(results.SucceedText("unused"), temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)).Once()
	res := h.run(t, Input{Prompt: "p", Tools: []string{"slow"}})

	c := res.Cards[0]
	require.Equal(t, results.StateFailed, c.State)
	require.Equal(t, results.FailureOutcomeUnknown, c.Failure.Reason, c.Failure.Detail)
	require.Equal(t, []string{"s1 error=true " + errorText(results.OutcomeUnknownMessage)}, toolTexts(h.model.last()))
}

func TestIdempotentToolsRetryOthersGetOneAttempt(t *testing.T) {
	h := newHarness(t, calls("", tc("f1", "flaky", `{}`), tc("f2", "flaky_once", `{}`)), results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "p", Tools: []string{"flaky", "flaky_once"}})

	require.ElementsMatch(t, []string{"flaky:attempt1", "flaky:attempt2", "flaky_once:attempt1"}, h.log.all())
	require.Equal(t, results.StateSucceeded, res.Cards[0].State)
	require.Equal(t, results.StateFailed, res.Cards[1].State)
	require.Equal(t, results.FailureInternal, res.Cards[1].Failure.Reason)
	require.Contains(t, res.Cards[1].Failure.Detail, "connection reset")
	require.Equal(t, []string{
		"f1 error=false ok on attempt 2",
		"f2 error=true " + errorText(results.InternalErrorText(res.Cards[1].Failure.Ref)),
	}, toolTexts(h.model.last()))
}

func TestInternalErrorDetailNeverReachesTheModel(t *testing.T) {
	h := newHarness(t, calls("", tc("b1", "boom", `{}`)), results.AssistantText("sorry"))
	res := h.run(t, Input{Prompt: "p", Tools: []string{"boom"}})

	c := res.Cards[0]
	require.Equal(t, results.FailureInternal, c.Failure.Reason)
	require.Contains(t, c.Failure.Detail, "hunter2", "operators see the detail")
	for _, req := range h.model.requests {
		b, err := json.Marshal(req)
		require.NoError(t, err)
		require.NotContains(t, string(b), "hunter2")
	}
	b, err := json.Marshal(res.Messages)
	require.NoError(t, err)
	require.NotContains(t, string(b), "hunter2")
}

func TestBadCallsFailBeforeAnyoneIsAsked(t *testing.T) {
	h := newHarness(t,
		calls("", tc("x1", "nope", `{}`), tc("x2", "write", `{"path": oops`), tc("x3", "write", `{"path":1}`)),
		results.AssistantText("fixed"))
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

	for _, c := range res.Cards {
		require.Equal(t, results.StateFailed, c.State, c.CallID)
		require.Empty(t, c.Decisions)
	}
	msgs := toolTexts(h.model.last())
	require.Contains(t, msgs[0], `unknown tool \"nope\"`)
	require.Contains(t, msgs[1], "not valid JSON")
	require.Contains(t, msgs[2], "invalid arguments for write")
	require.JSONEq(t, `"{\"path\": oops"`, string(res.Cards[1].Arguments))
}

func TestMaxSteps(t *testing.T) {
	loop := calls("", tc("", "echo", `{"text":"again"}`))
	h := newHarness(t, loop, loop, loop, loop)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}, MaxSteps: 3})
	require.Equal(t, StatusMaxSteps, res.Status)
	require.Equal(t, 3, res.Steps)
	require.Len(t, h.model.requests, 3)
	require.Equal(t, []string{"call_1_1", "call_2_1", "call_3_1"}, cardIDs(res.Cards), "ids are unique across the turn")
	require.Len(t, toolTexts(res.Messages), 3, "the last step's calls are answered too")
}

func TestRepeatedModelCallIDsStayUnique(t *testing.T) {
	h := newHarness(t,
		calls("", tc("call_0", "echo", `{"text":"a"}`)),
		calls("", tc("call_0", "echo", `{"text":"b"}`)),
		results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}})
	require.Equal(t, []string{"call_0", "call_0_2"}, cardIDs(res.Cards))
	require.Empty(t, res.Cards[0].ModelCallID, "a card whose id is the model's does not repeat it")
	require.Equal(t, "call_0", res.Cards[1].ModelCallID)
	// The model still sees its own ids.
	require.Equal(t, []string{"call_0 error=false a", "call_0 error=false b"}, toolTexts(res.Messages))
}

func TestInvalidUpdatesAreRejectedAndChangeNothing(t *testing.T) {
	h := newHarness(t, calls("", tc("w1", "write", `{"path":"a","content":"b"}`)), results.AssistantText("ok"))
	cases := []struct {
		r    Response
		want string
		kind string
	}{
		{Response{CallID: "zz", Decision: results.DecisionApprove}, `there is no call "zz" in this turn; waiting: w1`, ErrTypeUnknownCall},
		{Response{Decision: results.DecisionApprove}, "the response names no call_id", ErrTypeInvalidResponse},
		{Response{CallID: "w1", Decision: "maybe"}, `decision "maybe" is not one of approve, deny, answer, connected, cancel`, ErrTypeInvalidResponse},
		{Response{CallID: "w1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"x"`)}, "call w1 is pending_approval; answer does not fit that wait (use approve or deny or cancel)", ErrTypeInvalidResponse},
		{Response{CallID: "w1", Decision: results.DecisionDeny, Answer: json.RawMessage(`"x"`)}, "an answer only goes with the answer decision", ErrTypeInvalidResponse},
	}
	got := make([]updateOutcome, len(cases))
	for i, c := range cases {
		h.respond(time.Duration(i+1)*time.Minute, c.r, &got[i])
	}
	var mid State
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, 10*time.Minute)
	h.respond(11*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

	for i, c := range cases {
		require.EqualError(t, got[i].rejected, c.want)
		require.Equal(t, c.kind, got[i].rejectedKind, c.want)
	}
	require.Equal(t, results.StatePendingApproval, mid.Cards[0].State)
	require.Empty(t, mid.Cards[0].Decisions)
	require.Len(t, res.Cards[0].Decisions, 1)
}

func TestSignalRespondsAndInvalidSignalsAreCounted(t *testing.T) {
	h := newHarness(t, calls("", tc("w1", "write", `{"path":"a","content":"b"}`)), results.AssistantText("ok"))
	var mid State
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(RespondName, Response{CallID: "nope", Decision: results.DecisionApprove}) }, time.Minute)
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(RespondName, "not an object") }, 2*time.Minute)
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, 3*time.Minute)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(RespondName, Response{CallID: "w1", Decision: results.DecisionApprove, By: "webhook"})
	}, 4*time.Minute)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

	require.Equal(t, 2, mid.InvalidSignals)
	require.Contains(t, mid.LastInvalidSignal, "not a respond object")
	require.Equal(t, results.StatePendingApproval, mid.Cards[0].State)
	require.Equal(t, "webhook", res.Cards[0].Decisions[0].By)
	require.Equal(t, results.StateSucceeded, res.Cards[0].State)
	require.Equal(t, 2, res.InvalidSignals)
}

func TestModelRejectionFailsTheTurnWithCardsKept(t *testing.T) {
	h := newHarness(t, calls("", tc("e1", "echo", `{"text":"x"}`)))
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}})
	require.Equal(t, StatusFailed, res.Status)
	require.Contains(t, res.Error, "script has 1 replies")
	require.Len(t, res.Cards, 1)
}

func TestInvalidInputFailsClearly(t *testing.T) {
	for _, tt := range []struct {
		in   Input
		want string
	}{
		{Input{Model: "fake:m"}, "neither a prompt nor messages"},
		{Input{Prompt: "p"}, "names no model"},
		{Input{Prompt: "p", Model: "m", Policy: Policy{Approval: map[string]string{"x": "sometimes"}}}, `policy.approval["x"] is "sometimes"`},
		{Input{Prompt: "p", Model: "m", Policy: Policy{OnTimeout: "approve"}}, "the only supported value is deny"},
		{Input{Prompt: "p", Model: "m", Tools: []string{"echo", "echo"}}, `tool "echo" is listed twice`},
		{Input{Prompt: "p", Model: "m", Tools: []string{"missing"}}, "unknown tool(s) missing"},
	} {
		h := newHarness(t)
		h.env.ExecuteWorkflow(WorkflowName, tt.in)
		require.ErrorContains(t, h.env.GetWorkflowError(), tt.want)
	}
}

func TestSameScriptedTurnTwiceGivesIdenticalResults(t *testing.T) {
	runOnce := func() Result {
		h := newHarness(t,
			calls("", tc("q1", "ask", `{"prompt":"tone?"}`), tc("e1", "echo", `{"text":"x"}`)),
			calls("", tc("w1", "write", `{"path":"a","content":"b"}`)),
			results.AssistantText("done"))
		h.respond(time.Minute, Response{CallID: "q1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"formal"`), By: "u"}, nil)
		h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "u"}, nil)
		return h.run(t, Input{Prompt: "p", Tools: []string{"ask", "echo", "write"}})
	}
	a, b := runOnce(), runOnce()
	ja, err := json.Marshal(a)
	require.NoError(t, err)
	jb, err := json.Marshal(b)
	require.NoError(t, err)
	require.Equal(t, string(ja), string(jb))
	require.Equal(t, StatusCompleted, a.Status)
}

func TestDurationJSON(t *testing.T) {
	var p Policy
	require.NoError(t, json.Unmarshal([]byte(`{"response_timeout":"90m"}`), &p))
	require.Equal(t, Duration(90*time.Minute), p.ResponseTimeout)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"response_timeout":5}`), &p), "duration must be a string")
	require.ErrorContains(t, json.Unmarshal([]byte(`{"response_timeout":"soon"}`), &p), `"soon" is not a duration such as 90m, 24h or 7d`)
	b, err := json.Marshal(Duration(time.Hour))
	require.NoError(t, err)
	require.Equal(t, `"1h0m0s"`, string(b))

	// Days read in, and are written back as the Go duration recorded
	// histories hold, which reads back the same.
	require.NoError(t, json.Unmarshal([]byte(`{"response_timeout":"7d"}`), &p))
	require.Equal(t, Duration(7*24*time.Hour), p.ResponseTimeout)
	b, err = json.Marshal(p.ResponseTimeout)
	require.NoError(t, err)
	require.Equal(t, `"168h0m0s"`, string(b))
	var back Duration
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, p.ResponseTimeout, back)
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90m": 90 * time.Minute, "24h": 24 * time.Hour, "1h30m": 90 * time.Minute, "0s": 0,
		"7d": 7 * 24 * time.Hour, "0d": 0, "+2d": 48 * time.Hour,
		// Signs read as time.ParseDuration reads them; validateInput
		// rejects a negative response timeout.
		"-1h": -time.Hour, "-2d": -48 * time.Hour,
	} {
		got, err := ParseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "d", "soon", "1.5d", "1d12h", "7 d", "106752d", "9223372036854775808d"} {
		_, err := ParseDuration(in)
		require.ErrorContains(t, err, "is not a duration such as 90m, 24h or 7d", in)
	}
}

var mockAny = mock.Anything

func cardStates(cs []results.Card) []results.State {
	out := make([]results.State, len(cs))
	for i, c := range cs {
		out[i] = c.State
	}
	return out
}

func cardIDs(cs []results.Card) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.CallID
	}
	return out
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func errorText(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}
