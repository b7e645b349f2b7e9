package mcp

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// The server asks (multi round-trip, the default protocol): the run ends
// with a choice built from the requested enum, no session stays open,
// and the next run, carrying the answer, issues the call again with the
// input responses.
func TestElicitationBecomesAChoiceAndTheReissuedCallGetsTheAnswer(t *testing.T) {
	f := openStdio(t, nil)
	ask := f.tool(t, "t.ask")
	call := tool.Call{TurnID: "turn-e", CallID: "call-ask", Arguments: json.RawMessage(`{"name":"a.md"}`), User: "ada"}

	out := run(t, ask, call)
	require.Equal(t, results.KindInterrupt, out.Kind)
	in := out.Interrupt
	require.Equal(t, results.InterruptChoice, in.Type)
	require.Equal(t, "The MCP server t asks: Overwrite b.md?\nWhat to do", in.Prompt)
	require.Equal(t, []results.Option{{ID: "overwrite", Label: "Overwrite b.md"}, {ID: "keep_both", Label: "Keep both"}}, in.Options)
	require.Equal(t, []string{"ask started a.md"}, f.logLines(t), "the server did nothing past its question")
	_, err := os.Stat(f.states)
	require.NoError(t, err)

	call.Resume = answer(`"keep_both"`)
	out = run(t, ask, call)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, "renamed a.md: keep_both", out.Success.Parts[0].Text)
	// A multi round-trip handler runs once per round: the input_required
	// result parked the call, and the re-issue carried the answer and
	// the request state, so the server finished in its second round.
	require.Equal(t, []string{"ask started a.md", "ask started a.md", "ask done a.md keep_both"}, f.logLines(t))
	entries, err := os.ReadDir(f.states)
	require.NoError(t, err)
	require.Empty(t, entries, "a finished call leaves no record")
}

// A server on an older protocol asks with elicitation/create requests in
// the middle of the call, twice; each answer is replayed, in order, when
// the call is issued again.
func TestLegacyElicitationsAreReplayedInOrder(t *testing.T) {
	f := openStdio(t, func(s *Server) { s.ProtocolVersion = "2025-11-25" })
	ask := f.tool(t, "t.ask_legacy")
	call := tool.Call{TurnID: "turn-l", CallID: "call-1", Arguments: json.RawMessage(`{"name":"n"}`)}

	out := run(t, ask, call)
	require.Equal(t, results.InterruptChoice, out.Interrupt.Type)
	require.Len(t, out.Interrupt.Options, 2)

	call.Resume = answer(`"overwrite"`)
	out = run(t, ask, call)
	require.Equal(t, results.KindInterrupt, out.Kind, "%+v", out)
	require.Equal(t, "The MCP server t asks: Really?\nsure", out.Interrupt.Prompt)
	require.Equal(t, []results.Option{{ID: "true", Label: "Yes"}, {ID: "false", Label: "No"}}, out.Interrupt.Options, "a boolean field is a yes/no choice")

	call.Resume = answer(`"true"`)
	out = run(t, ask, call)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, "n accept overwrite true", out.Success.Parts[0].Text)
	require.Equal(t, 1, count(f.logLines(t), "ask_legacy done"))
	require.Equal(t, 1, count(f.logLines(t), "ask_legacy started"), "the answers came back to this worker while the call was held: the server ran once")
}

// A held call gives up after the server's timeout: its question is
// answered with an error, and the person's later answer takes the
// durable path (the call issued again, the question answered from the
// record).
func TestALegacyCallHeldTooLongIsIssuedAgain(t *testing.T) {
	f := openStdio(t, func(s *Server) { s.ProtocolVersion = "2025-11-25"; s.Timeout = Duration(time.Second) })
	ask := f.tool(t, "t.ask_legacy")
	call := tool.Call{TurnID: "turn-l2", CallID: "call-1", Arguments: json.RawMessage(`{"name":"n"}`)}
	out := run(t, ask, call)
	require.Equal(t, results.InterruptChoice, out.Interrupt.Type)
	live := func() int {
		f.ts.live.mu.Lock()
		defer f.ts.live.mu.Unlock()
		return len(f.ts.live.m)
	}
	require.Equal(t, 1, live(), "the call is held open on this worker")
	require.Eventually(t, func() bool { return live() == 0 }, 10*time.Second, 20*time.Millisecond,
		"the held call ends once the window has passed")

	call.Resume = answer(`"keep_both"`)
	out = run(t, ask, call)
	require.Equal(t, results.KindInterrupt, out.Kind, "%+v", out)
	require.Contains(t, out.Interrupt.Prompt, "Really?")
	require.Equal(t, 2, count(f.logLines(t), "ask_legacy started"), "the call was issued again")
}

// Each kind of form maps to its interrupt and back: several fields are a
// question with the server's schema and a JSON object answer, one field
// a question with the field's schema, no field an accept/decline choice.
func TestElicitationFormsMapToQuestionsAndBack(t *testing.T) {
	f := openStdio(t, nil)
	chain := f.tool(t, "t.ask_chain")
	call := tool.Call{TurnID: "turn-c", CallID: "call-1"}

	out := run(t, chain, call)
	require.Equal(t, results.InterruptQuestion, out.Interrupt.Type)
	schema, err := tool.CompileSchema(out.Interrupt.Schema)
	require.NoError(t, err)
	require.NoError(t, schema.Validate(json.RawMessage(`{"name":"Ada","age":36}`)))
	require.Error(t, schema.Validate(json.RawMessage(`{"name":"Ada"}`)), "the workflow checks answers against the server's schema")

	call.Resume = answer(`{"name":"Ada","age":36}`)
	out = run(t, chain, call)
	require.Equal(t, results.InterruptQuestion, out.Interrupt.Type)
	require.Contains(t, out.Interrupt.Prompt, "New name?\nNew name")
	require.JSONEq(t, `{"type":"string","title":"New name","minLength":0}`, string(out.Interrupt.Schema))

	call.Resume = answer(`"b.md"`)
	out = run(t, chain, call)
	require.Equal(t, results.InterruptChoice, out.Interrupt.Type)
	require.Equal(t, []results.Option{{ID: "accept", Label: "Accept"}, {ID: "decline", Label: "Decline"}}, out.Interrupt.Options)

	call.Resume = answer(`"decline"`)
	out = run(t, chain, call)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	text := out.Success.Parts[0].Text
	require.Contains(t, text, `form={"action":"accept","content":{"age":36,"name":"Ada"}};`)
	require.Contains(t, text, `value={"action":"accept","content":{"to":"b.md"}};`)
	require.Contains(t, text, `confirm={"action":"decline"};`)
}

// The ways an answer cannot be delivered end the call with a tool error
// the model reads, never silently and never by guessing.
func TestUndeliverableAnswersAreToolErrors(t *testing.T) {
	f := openStdio(t, nil)

	// No record of the question (another worker's state directory).
	out := run(t, f.tool(t, "t.ask"), tool.Call{TurnID: "turn-x", CallID: "call-1", Arguments: json.RawMessage(`{"name":"a"}`), Resume: answer(`"overwrite"`)})
	require.Equal(t, results.KindToolError, out.Kind)
	require.Contains(t, out.ToolError.Message, "no record of the question")

	// An answer that does not fit what the server asked.
	ask := f.tool(t, "t.ask")
	call := tool.Call{TurnID: "turn-b", CallID: "call-1", Arguments: json.RawMessage(`{"name":"a"}`)}
	require.Equal(t, results.KindInterrupt, run(t, ask, call).Kind)
	call.Resume = answer(`"delete_everything"`)
	out = run(t, ask, call)
	require.Equal(t, results.KindToolError, out.Kind)
	require.Contains(t, out.ToolError.Message, "does not fit what the server asked")
}

// A retried attempt of the run that took an answer in and parked on the
// next question finds that answer among the stored ones and does not
// apply it to the next question.
func TestARetriedAttemptDoesNotApplyItsAnswerTwice(t *testing.T) {
	f := openStdio(t, func(s *Server) { s.ProtocolVersion = "2025-11-25" })
	ask := f.tool(t, "t.ask_legacy").(*mcpTool)
	call := tool.Call{TurnID: "turn-a", CallID: "call-1", Arguments: json.RawMessage(`{"name":"n"}`)}
	ctx := context.Background()

	out, err := ask.run(ctx, call, activityRun{"run", "1"})
	require.NoError(t, err)
	require.Equal(t, results.KindInterrupt, out.Kind)
	call.Resume = answer(`"overwrite"`)
	for attempt := 1; attempt <= 2; attempt++ {
		out, err = ask.run(ctx, call, activityRun{"run", "2"})
		require.NoError(t, err)
		require.Equal(t, results.KindInterrupt, out.Kind, "attempt %d: %+v", attempt, out)
		require.Equal(t, "The MCP server t asks: Really?\nsure", out.Interrupt.Prompt, "attempt %d", attempt)
	}
	call.Resume = answer(`"false"`)
	out, err = ask.run(ctx, call, activityRun{"run", "3"})
	require.NoError(t, err)
	require.Equal(t, "n accept overwrite false", out.Success.Parts[0].Text)
}

func count(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if l == s {
			n++
		}
	}
	return n
}

// A turn cancelled while a call waited on its second question leaves that
// call's answers behind; a new run that re-uses the turn id (and, with a
// scripted or replayed model, the call id) must start the call afresh,
// asked its first question by its own user, and must not be able to
// answer the old run's pending question either.
func TestElicitationAnswersBelongToTheRunThatGotThem(t *testing.T) {
	f := openStdio(t, nil)
	chain := f.tool(t, "t.ask_chain").(*mcpTool)
	call := tool.Call{TurnID: "turn-reused", CallID: "call-1"}
	ctx := context.Background()

	out, err := chain.run(ctx, call, activityRun{"run-a", "1"})
	require.NoError(t, err)
	require.Equal(t, results.InterruptQuestion, out.Interrupt.Type)
	call.Resume = answer(`{"name":"Ada","age":36}`)
	out, err = chain.run(ctx, call, activityRun{"run-a", "2"})
	require.NoError(t, err)
	require.Contains(t, out.Interrupt.Prompt, "New name?", "run A waits on its second question")

	// The turn is cancelled; a new execution with the same turn id calls
	// the same tool with the same call id.
	call.Resume = nil
	out, err = chain.run(ctx, call, activityRun{"run-b", "1"})
	require.NoError(t, err)
	require.Equal(t, results.KindInterrupt, out.Kind, "%+v", out)
	require.Contains(t, out.Interrupt.Prompt, "Who are you?", "run B is asked its first question, not given run A's answer")

	// An answer, in yet another execution, to the question only run A
	// was asked finds no record there.
	call.Resume = answer(`"b.md"`)
	out, err = chain.run(ctx, call, activityRun{"run-c", "2"})
	require.NoError(t, err)
	require.Equal(t, results.KindToolError, out.Kind, "%+v", out)
	require.Contains(t, out.ToolError.Message, "no record of the question")
}

// A URL-mode elicitation is a choice whose prompt carries the page; done
// tells the server the person accepted, and the call goes on.
func TestURLElicitationIsAChoiceCarryingThePage(t *testing.T) {
	f := openStdio(t, nil)
	askURL := f.tool(t, "t.ask_url")
	call := tool.Call{TurnID: "turn-u", CallID: "call-1"}
	out := run(t, askURL, call)
	require.Equal(t, results.KindInterrupt, out.Kind, "%+v", out)
	require.Equal(t, results.InterruptChoice, out.Interrupt.Type)
	require.Contains(t, out.Interrupt.Prompt, "https://login.invalid/")
	require.Contains(t, out.Interrupt.Prompt, "Log in")
	require.Equal(t, []results.Option{{ID: "done", Label: "Done"}, {ID: "decline", Label: "Decline"}}, out.Interrupt.Options)
	call.Resume = answer(`"done"`)
	out = run(t, askURL, call)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, "answered accept", out.Success.Parts[0].Text)
}

// Only an http(s) page without credentials reaches a card.
func TestURLElicitationRefusesOtherSchemes(t *testing.T) {
	for _, u := range []string{"javascript:alert(1)", "file:///etc/passwd", "https://user:pw@login.invalid/", "//login.invalid/x", "https://login.invalid/\n"} {
		_, err := describe("t", &mcpsdk.ElicitParams{Mode: "url", Message: "Log in", URL: u, ElicitationID: "e"})
		require.Error(t, err, u)
	}
	q, err := describe("t", &mcpsdk.ElicitParams{Mode: "url", Message: "Log in", URL: "http://127.0.0.1:8080/login?x=1", ElicitationID: "e"})
	require.NoError(t, err)
	require.Equal(t, kindURL, q.Kind)
}

// Fields the person leaves out of a form take the server's defaults
// (and a required field with a default need not be given); what the
// person did give is kept.
func TestFormAnswersTakeTheSchemasDefaults(t *testing.T) {
	q, err := describe("t", &mcpsdk.ElicitParams{Message: "Profile", RequestedSchema: json.RawMessage(`{"type":"object","required":["name","age"],"properties":{
		"name":{"type":"string","default":"John Doe"},"age":{"type":"integer","default":30},
		"status":{"type":"string","enum":["active","inactive"],"default":"active"},"verified":{"type":"boolean","default":true},"note":{"type":"string"}}}`)})
	require.NoError(t, err)
	require.Equal(t, kindObject, q.Kind)
	require.Contains(t, q.Interrupt.Prompt, "Fields left out take the server's defaults: age, name, status, verified.")
	shown, err := tool.CompileSchema(q.Interrupt.Schema)
	require.NoError(t, err)
	require.NoError(t, shown.Validate(json.RawMessage(`{}`)), "the card's schema lets defaulted fields be left out")

	a, err := q.answer(json.RawMessage(`{"age":41}`))
	require.NoError(t, err)
	require.Equal(t, "accept", a.Action)
	require.Equal(t, map[string]any{"name": "John Doe", "age": float64(41), "status": "active", "verified": true}, a.Content)

	_, err = q.answer(json.RawMessage(`{"status":"gone"}`))
	require.Error(t, err, "an answer is still checked against what the server asked")
}

// A multi-round-trip answer goes back with its input request's id and
// the request state, not matched by wording: a server whose question
// differs each time it is asked still gets its answer.
func TestMultiRoundTripAnswersNeedNoDeterministicServer(t *testing.T) {
	f := openStdio(t, nil)
	random := f.tool(t, "t.ask_random")
	call := tool.Call{TurnID: "turn-r", CallID: "call-1"}
	require.Equal(t, results.KindInterrupt, run(t, random, call).Kind)
	call.Resume = answer(`"accept"`)
	out := run(t, random, call)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, "answered", out.Success.Parts[0].Text)
}

// Input requests of one round are put to the person one at a time; the
// call is issued again once, with both answers and the request state. A
// retried attempt of the run that parked asks the same question again
// without calling the server.
func TestOneRoundsInputRequestsAreAskedInTurn(t *testing.T) {
	f := openStdio(t, nil)
	two := f.tool(t, "t.ask_two").(*mcpTool)
	call := tool.Call{TurnID: "turn-2", CallID: "call-1"}
	ctx := context.Background()
	out, err := two.run(ctx, call, activityRun{"run", "1"})
	require.NoError(t, err)
	require.Contains(t, out.Interrupt.Prompt, "New name?")

	call.Resume = answer(`"c.md"`)
	for attempt := 1; attempt <= 2; attempt++ {
		out, err = two.run(ctx, call, activityRun{"run", "2"})
		require.NoError(t, err)
		require.Equal(t, results.InterruptChoice, out.Interrupt.Type, "attempt %d: %+v", attempt, out)
		require.Contains(t, out.Interrupt.Prompt, "Go on?", "attempt %d", attempt)
	}
	require.Equal(t, []string{"ask_two round"}, f.logLines(t), "the server is not called until the round is answered")

	call.Resume = answer(`"accept"`)
	out, err = two.run(ctx, call, activityRun{"run", "3"})
	require.NoError(t, err)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, "accept c.md accept s1", out.Success.Parts[0].Text)
	require.Equal(t, []string{"ask_two round", "ask_two round"}, f.logLines(t))
}
