package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/storage/transcript"
	"github.com/tollgate-dev/tollgate/workflows"
)

// A turn parks for approval; nothing runs until a person approves through
// an Update sent from a client the worker and the starter know nothing of.
func TestApprovalApprovedByUpdateFromAnotherClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "approval_approved")
	model := e.script(
		reply("I'll write the summary.", call("w1", "write_file", map[string]string{"path": "summary.md", "content": "# Summary\n"})),
		expecting(reply("Written."), 1, "created summary.md"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Summarise", Model: model, Tools: []string{"write_file"}})

	parked := e.waitCard(run, "w1", results.StatePendingApproval)
	require.Equal(t, workflows.StatusWaiting, parked.Status)
	require.NoFileExists(t, filepath.Join(e.ws, "summary.md"), "no tool runs before its approval")

	approver := e.dial("e2e-approver")
	got, err := respond(approver, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice"})
	require.NoError(t, err)
	require.Equal(t, "w1", got.CallID)
	require.Contains(t, []results.State{results.StateRunning, results.StateSucceeded}, got.State)

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, "Written.", res.Text)
	c := mustCard(t, res.Cards, "w1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Len(t, c.Decisions, 1)
	require.Equal(t, "alice", c.Decisions[0].By)
	require.Equal(t, results.DecisionApprove, c.Decisions[0].Decision)
	b, err := os.ReadFile(filepath.Join(e.ws, "summary.md"))
	require.NoError(t, err)
	require.Equal(t, "# Summary\n", string(b))
	e.record(run)
}

// A denied call never runs; the model gets the reason and is told not to
// retry.
func TestApprovalDenied(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "approval_denied")
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "notes.md", "content": "overwrite"})),
		expecting(reply("Understood, I won't write it."), 1, "Do not retry the same call"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Rewrite notes.md", Model: model, Tools: []string{"write_file"}})
	e.waitCard(run, "w1", results.StatePendingApproval)

	got, err := respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionDeny, Reason: "not that file", By: "bob"})
	require.NoError(t, err)
	require.Equal(t, results.StateRefused, got.State)
	require.Equal(t, "not that file", got.Reason)

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.NoFileExists(t, filepath.Join(e.ws, "notes.md"), "a denied call never runs")
	require.Equal(t, []string{"w1 error=true " + errorText(results.RefusedText("not that file"))}, toolTexts(res.Messages))
	e.record(run)
}

// Approve with edited arguments: an edit that does not fit the schema is
// rejected by the validator and changes nothing; a valid one runs, and the
// model is told the arguments were edited.
func TestApprovalWithEditedArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "approval_edited_arguments")
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "summary.md", "content": "draft"})),
		expecting(reply("Done."), 1, "a person edited the arguments"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write the summary", Model: model, Tools: []string{"write_file"}})
	e.waitCard(run, "w1", results.StatePendingApproval)

	_, err := respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, Arguments: json.RawMessage(`{"path":3}`), By: "carol"})
	require.ErrorContains(t, err, "the edited arguments for call w1 do not validate")
	s := e.waitCard(run, "w1", results.StatePendingApproval)
	require.Empty(t, mustCard(t, s.Cards, "w1").Decisions, "a rejected update changes nothing")

	_, err = respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, Arguments: json.RawMessage(`{"path":"summary.md","content":"final"}`), By: "carol"})
	require.NoError(t, err)

	res := e.result(run)
	c := mustCard(t, res.Cards, "w1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.JSONEq(t, `{"path":"summary.md","content":"draft"}`, string(c.Arguments))
	require.JSONEq(t, `{"path":"summary.md","content":"final"}`, string(c.EditedArguments))
	require.Len(t, c.Decisions, 1)
	b, err := os.ReadFile(filepath.Join(e.ws, "summary.md"))
	require.NoError(t, err)
	require.Equal(t, "final", string(b))
	require.Equal(t, 1, countEvents(e.history(run), enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), "the rejected update left no event")
	e.record(run)
}

// Two calls wait in one step and are answered in reverse order, each on its
// own; the calls that need nobody run meanwhile, in call order; the tool
// messages follow the model's call order.
func TestTwoWaitsAnsweredInReverseOrder(t *testing.T) {
	t.Parallel()
	log := &runLog{}
	e := newEnv(t, "two_waits_reverse_order", stepTool(log))
	model := e.script(
		reply("",
			call("w1", "write_file", map[string]string{"path": "a.md", "content": "A"}),
			call("s1", "step", map[string]string{"text": "first"}),
			call("w2", "write_file", map[string]string{"path": "b.md", "content": "B"}),
			call("s2", "step", map[string]string{"text": "second"}),
		),
		expecting(reply("Both written."), 4, ""),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write both", Model: model, Tools: []string{"write_file", "step"}})

	s := e.waitState(run, "both writes waiting, both steps done", func(s workflows.State) bool {
		return len(s.Cards) == 4 &&
			s.Cards[0].State == results.StatePendingApproval && s.Cards[1].State == results.StateSucceeded &&
			s.Cards[2].State == results.StatePendingApproval && s.Cards[3].State == results.StateSucceeded
	})
	require.Equal(t, workflows.StatusWaiting, s.Status)
	require.Equal(t, []string{"step:first", "step:second"}, log.all())

	_, err := respond(e.caller, run, workflows.Response{CallID: "w2", Decision: results.DecisionApprove, By: "dan"})
	require.NoError(t, err)
	s = e.waitCard(run, "w2", results.StateSucceeded)
	require.Equal(t, results.StatePendingApproval, mustCard(t, s.Cards, "w1").State, "answering w2 leaves w1 waiting")
	require.FileExists(t, filepath.Join(e.ws, "b.md"))
	require.NoFileExists(t, filepath.Join(e.ws, "a.md"))

	_, err = respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "dan"})
	require.NoError(t, err)

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, []string{
		"w1 error=false created a.md (1 bytes)",
		"s1 error=false did first",
		"w2 error=false created b.md (1 bytes)",
		"s2 error=false did second",
	}, toolTexts(res.Messages))
	e.record(run)
}

// A choice interrupt parks the call; an answer that is not an option is
// rejected; a valid one runs the tool again with it.
func TestChoiceInterruptAnswered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "choice_answered")
	model := e.script(
		reply("", call("q1", "ask_user", map[string]any{"prompt": "Which tone?", "options": []string{"formal", "casual"}})),
		expecting(reply("Casual it is."), 1, "casual"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Announce it", Model: model, Tools: []string{"ask_user"}})
	s := e.waitCard(run, "q1", results.StateWaitingAnswer)
	in := mustCard(t, s.Cards, "q1").Interrupt
	require.Equal(t, results.InterruptChoice, in.Type)
	require.Equal(t, "Which tone?", in.Prompt)

	_, err := respond(e.caller, run, workflows.Response{CallID: "q1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"sarcastic"`)})
	require.ErrorContains(t, err, `"sarcastic" is not one of the options: formal, casual`)
	_, err = respond(e.caller, run, workflows.Response{CallID: "q1", Decision: results.DecisionApprove})
	require.ErrorContains(t, err, "does not fit that wait")

	_, err = respond(e.caller, run, workflows.Response{CallID: "q1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"casual"`), By: "erin"})
	require.NoError(t, err)
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, []string{"q1 error=false casual"}, toolTexts(res.Messages))
	c := mustCard(t, res.Cards, "q1")
	require.Len(t, c.Decisions, 1)
	require.JSONEq(t, `"casual"`, string(c.Decisions[0].Answer))
	e.record(run)
}

// connection_required parks the call; once the user has connected,
// "connected" runs the tool again and it finds the connection.
func TestConnectionRequiredThenConnected(t *testing.T) {
	t.Parallel()
	conns := connections.NewMemoryStore()
	e := newEnv(t, "connection_connected", issuesTool(conns))
	e.conns = conns
	model := e.script(
		reply("", call("i1", "issues", map[string]string{"repo": "tollgate"})),
		expecting(reply("One open issue."), 1, "#1 crash on start"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Any issues?", Model: model, Tools: []string{"issues"}, User: "erin"})
	s := e.waitCard(run, "i1", results.StateWaitingConnection)
	require.Equal(t, "github", mustCard(t, s.Cards, "i1").Connection.Provider)

	require.NoError(t, conns.Put(context.Background(), connections.Credential{Provider: "github", User: "erin", Token: "t0ken"}))
	got, err := respond(e.caller, run, workflows.Response{CallID: "i1", Decision: results.DecisionConnected, By: "erin"})
	require.NoError(t, err)
	require.NotEqual(t, results.StateWaitingConnection, got.State)

	res := e.result(run)
	require.Equal(t, []string{"i1 error=false tollgate: #1 crash on start (as erin)"}, toolTexts(res.Messages))
	require.NotContains(t, fmt.Sprint(res), "t0ken")
	e.record(run)
}

// Declining a connection is a tool error the model can work around.
func TestConnectionDeclined(t *testing.T) {
	t.Parallel()
	conns := connections.NewMemoryStore()
	e := newEnv(t, "connection_declined", issuesTool(conns))
	e.conns = conns
	model := e.script(
		reply("", call("i1", "issues", map[string]string{"repo": "tollgate"})),
		expecting(reply("I can't list them without GitHub."), 1, "did not connect github"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Any issues?", Model: model, Tools: []string{"issues"}, User: "erin"})
	e.waitCard(run, "i1", results.StateWaitingConnection)

	_, err := respond(e.caller, run, workflows.Response{CallID: "i1", Decision: results.DecisionCancel, Reason: "no account", By: "erin"})
	require.NoError(t, err)
	res := e.result(run)
	c := mustCard(t, res.Cards, "i1")
	require.Equal(t, results.StateFailed, c.State)
	require.Equal(t, results.FailureToolError, c.Failure.Reason)
	require.Equal(t, []string{"i1 error=true " + errorText("the user did not connect github (no account), so the tool did not run")}, toolTexts(res.Messages))
	e.record(run)
}

// A wait that outlives response_timeout is denied on a server timer.
func TestDeadlineDenies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "deadline_denied")
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "x"})),
		expecting(reply("Nobody answered; I left it."), 1, "no response within 2s"),
	)
	e.startWorker()
	started := time.Now()
	run := e.start(workflows.Input{
		Prompt: "Write a.md", Model: model, Tools: []string{"write_file"},
		Policy: workflows.Policy{ResponseTimeout: workflows.Duration(2 * time.Second), OnTimeout: workflows.OnTimeoutDeny},
	})
	res := e.result(run)
	require.GreaterOrEqual(t, time.Since(started), 2*time.Second)
	c := mustCard(t, res.Cards, "w1")
	require.Equal(t, results.StateRefused, c.State)
	require.Equal(t, "no response within 2s", c.Reason)
	require.Equal(t, results.DecisionTimeout, c.Decisions[0].Decision)
	require.NoFileExists(t, filepath.Join(e.ws, "a.md"))
	require.Equal(t, 1, countEvents(e.history(run), enumspb.EVENT_TYPE_TIMER_FIRED))
	e.record(run)
}

// Cancelling the turn refuses the waiting call and returns what the turn
// has, every call answered.
func TestCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "cancel_while_waiting")
	model := e.script(reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "x"})))
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write a.md", Model: model, Tools: []string{"write_file"}})
	e.waitCard(run, "w1", results.StatePendingApproval)

	require.NoError(t, e.caller.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
	res := e.result(run)
	require.Equal(t, workflows.StatusCancelled, res.Status)
	c := mustCard(t, res.Cards, "w1")
	require.Equal(t, results.StateRefused, c.State)
	require.Equal(t, "the turn was cancelled while this call waited", c.Reason)
	require.Len(t, toolTexts(res.Messages), 1, "every call is answered")
	require.NoFileExists(t, filepath.Join(e.ws, "a.md"))
	e.record(run)
}

// Cancelling the turn while a tool runs cancels the tool's activity (the
// tool sees its context end) and answers the call.
func TestCancelWhileToolRuns(t *testing.T) {
	t.Parallel()
	g := newGate(t, "job", false, true)
	e := newEnv(t, "cancel_while_running", g)
	model := e.script(reply("", call("j1", "job", map[string]string{"job": "build"})))
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Build", Model: model, Tools: []string{"job"}})
	g.waitStarted(t, 1)

	require.NoError(t, e.caller.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID()))
	res := e.result(run)
	require.Equal(t, workflows.StatusCancelled, res.Status)
	c := mustCard(t, res.Cards, "j1")
	require.Equal(t, results.StateFailed, c.State)
	require.Contains(t, c.Failure.Message, "cancelled while this tool ran")
	require.Len(t, toolTexts(res.Messages), 1)
	select {
	case <-g.cancelled:
	case <-time.After(waitTimeout):
		t.Fatal("the running tool was never cancelled")
	}
	e.record(run)
}

// A transfer ends the turn with status transferred and the target.
func TestTransfer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "transfer")
	model := e.script(reply("Handing you to billing.", call("h1", "handoff", map[string]string{"target": "billing", "message": "wants a refund"})))
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Refund please", Model: model, Tools: []string{"handoff"}})
	res := e.result(run)
	require.Equal(t, workflows.StatusTransferred, res.Status)
	require.Equal(t, "billing", res.Transfer.Target)
	require.Equal(t, "Handing you to billing.", res.Text)
	require.Equal(t, 1, res.Steps, "no model call after a transfer")
	e.record(run)
}

// max_steps stops a model that never gives a final answer; the last step's
// calls are answered too.
func TestMaxSteps(t *testing.T) {
	t.Parallel()
	log := &runLog{}
	e := newEnv(t, "max_steps", stepTool(log))
	run, res := e.stopAtMaxSteps()
	require.Equal(t, 2, res.Steps)
	require.Equal(t, []string{"step:one", "step:two"}, log.all())
	require.Len(t, toolTexts(res.Messages), 2)
	e.record(run)
}

// A turn that stops after a reply whose messages travelled inline (short
// ones, under activities.InlineTailBytes) stores them before it returns:
// its head then covers the conversation through that reply, as a session
// continuing from it expects. The history goes to the corpus.
func TestInlineTailStoredWhenTheTurnStops(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "inline_tail_stored", stepTool(&runLog{}))
	run, res := e.stopAtMaxSteps()

	events := e.history(run)
	require.Equal(t, 2, scheduled(events, activities.CallModelName, ""))
	require.Equal(t, 1, localRuns(events, activities.StoreTranscriptName), "the two replies' messages were stored once, as the turn stopped")
	store, err := transcript.NewStore(datadir.Transcripts(e.data))
	require.NoError(t, err)
	conv, err := store.Load(res.Head)
	require.NoError(t, err)
	require.Equal(t, res.Messages[:len(res.Messages)-1], conv, "the head covers all but the last tool result")
	e.record(run)
}

// The tool definitions travel with the first model call alone, on the
// real server: it stores them beside the transcript, and the later calls
// name them. The history goes to the corpus.
func TestToolDefinitionsTravelOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "tools_ref", stepTool(&runLog{}))
	run, _ := e.stopAtMaxSteps()

	var ins []activities.CallModelInput
	for _, ev := range e.history(run) {
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a.GetActivityType().GetName() != activities.CallModelName {
			continue
		}
		var in activities.CallModelInput
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &in))
		ins = append(ins, in)
	}
	require.Len(t, ins, 2)
	require.True(t, ins[0].StoreTools)
	require.Len(t, ins[0].Tools, 1)
	require.Empty(t, ins[1].Tools)
	require.NotEmpty(t, ins[1].ToolsRef)
	store, err := transcript.NewStore(datadir.Transcripts(e.data))
	require.NoError(t, err)
	tools, err := store.Tools(t.Context(), ins[1].ToolsRef)
	require.NoError(t, err)
	require.Equal(t, ins[0].Tools, tools)
	e.record(run)
}

// stopAtMaxSteps runs a turn of at most two steps whose model calls the
// step tool at every reply, to its end at max_steps.
func (e *env) stopAtMaxSteps() (client.WorkflowRun, workflows.Result) {
	e.t.Helper()
	model := e.script(
		reply("", call("s1", "step", map[string]string{"text": "one"})),
		reply("", call("s2", "step", map[string]string{"text": "two"})),
		reply("", call("s3", "step", map[string]string{"text": "three"})),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Loop", Model: model, Tools: []string{"step"}, MaxSteps: 2})
	res := e.result(run)
	require.Equal(e.t, workflows.StatusMaxSteps, res.Status)
	return run, res
}

// The Signal path: invalid respond signals are dropped and counted in the
// state; a valid one answers the wait.
func TestSignalRespondsAndInvalidSignalsAreCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "invalid_signal_counted")
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "x"})),
		expecting(reply("Written."), 1, "created a.md"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write a.md", Model: model, Tools: []string{"write_file"}})
	e.waitCard(run, "w1", results.StatePendingApproval)

	ctx := context.Background()
	require.NoError(t, e.caller.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.RespondName, workflows.Response{CallID: "nope", Decision: results.DecisionApprove}))
	require.NoError(t, e.caller.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.RespondName, "not an object"))
	s := e.waitState(run, "two invalid signals counted", func(s workflows.State) bool { return s.InvalidSignals == 2 })
	require.Contains(t, s.LastInvalidSignal, "not a respond object")
	require.Equal(t, results.StatePendingApproval, mustCard(t, s.Cards, "w1").State)

	require.NoError(t, e.caller.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.RespondName, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "webhook"}))
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, 2, res.InvalidSignals)
	c := mustCard(t, res.Cards, "w1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, "webhook", c.Decisions[0].By)
	e.record(run)
}

// The official CLI's way in: `temporal workflow update execute --name
// respond --input '{"call_id":...,"decision":"approve"}'` sends the JSON
// text as a json/plain payload, and `temporal workflow query --type state`
// prints the state as JSON. The same names and payload shapes, through the
// Go client, drive a turn to the end.
func TestOfficialCLIShapes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "cli_respond_raw_json")
	model := e.script(
		reply("", call("call_write", "write_file", map[string]string{"path": "summary.md", "content": "ok"})),
		expecting(reply("Done."), 1, "created summary.md"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write the summary", Model: model, Tools: []string{"write_file"}})

	queryState := func() (map[string]any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		v, err := e.caller.QueryWorkflow(ctx, run.GetID(), "", "state")
		if err != nil {
			return nil, err
		}
		var m map[string]any
		return m, v.Get(&m)
	}
	require.True(t, eventually(func() bool {
		m, err := queryState()
		if err != nil {
			return false
		}
		cards, _ := m["cards"].([]any)
		if len(cards) != 1 {
			return false
		}
		c := cards[0].(map[string]any)
		return m["status"] == "waiting" && c["call_id"] == "call_write" && c["state"] == "pending_approval"
	}), "state never showed the call pending approval")

	raw := func(s string) converter.RawValue {
		return converter.NewRawValue(&commonpb.Payload{
			Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
			Data:     []byte(s),
		})
	}
	update := func(payload string) (map[string]any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		h, err := e.caller.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: run.GetID(), UpdateName: "respond", Args: []any{raw(payload)},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err != nil {
			return nil, err
		}
		var out map[string]any
		return out, h.Get(ctx, &out)
	}
	_, err := update(`{"call_id":"nope","decision":"approve"}`)
	require.ErrorContains(t, err, `there is no call "nope" in this turn; waiting: call_write`)
	card, err := update(`{"call_id":"call_write","decision":"approve","by":"cli"}`)
	require.NoError(t, err)
	require.Equal(t, "call_write", card["call_id"])
	require.Contains(t, []any{"running", "succeeded"}, card["state"])

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	final, err := queryState()
	require.NoError(t, err)
	require.Equal(t, "completed", final["status"])
	e.record(run)
}
