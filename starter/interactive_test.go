package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// scriptedTurn plays a turn that waits four times in a row: an approval,
// a choice, a question with a schema, a connection. It rejects the first
// edited arguments, as the validator would for a schema mismatch.
func scriptedTurn() *fakeTurns {
	fake := newFake(workflows.State{Status: workflows.StatusWaiting, Step: 1, Cards: []results.Card{approvalCard()}})
	rejectedOnce := false
	fake.respond = func(f *fakeTurns, r workflows.Response) (results.Card, error) {
		switch r.CallID {
		case "call_write":
			if len(r.Arguments) > 0 && !rejectedOnce {
				rejectedOnce = true
				return results.Card{}, &rejectedError{msg: "the edited arguments for call call_write do not validate: content is required"}
			}
			card := succeeded(approvalCard(), "wrote summary.md")
			f.setCard(card)
			f.state.Step = 2
			f.setCard(choiceCard())
			return card, nil
		case "call_tone":
			card := succeeded(choiceCard(), "friendly")
			f.setCard(card)
			f.setCard(questionCard(`{"type":"integer"}`))
			return card, nil
		case "call_q":
			card := succeeded(questionCard(""), "3")
			f.setCard(card)
			f.setCard(connectionCard())
			return card, nil
		case "call_issues":
			card := results.Card{CallID: "call_issues", Tool: "list_issues", State: results.StateFailed, Arguments: json.RawMessage(`{}`),
				Failure: &results.Failure{Reason: results.FailureToolError, Message: "the user did not connect github"}}
			f.setCard(card)
			f.finishLocked(workflows.StatusCompleted, "Finished without the issues.")
			return card, nil
		}
		return results.Card{}, &rejectedError{msg: "unknown call"}
	}
	return fake
}

func TestInteractiveAnswersEveryWait(t *testing.T) {
	fake := scriptedTurn()
	stdin := strings.Join([]string{
		"maybe",                  // not an approval answer: asked again
		"e",                      // edit
		`{"path": "summary.md",`, // multi-line JSON, first half
		`"content": 1}`,          // parses: sent, and rejected
		"a",                      // the same wait is asked again: approve
		"9",                      // not an option
		"2",                      // friendly, by number
		"three",                  // not JSON, and the schema wants an integer
		"3",                      // ok
		"x",                      // decline the connection
	}, "\n") + "\n"
	o := newHarness(t, fake).run(stdin, "run", "--interactive", "--id", "T", "--by", "bo", "Summarise")
	require.Equal(t, 0, o.code, "stdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)

	require.Len(t, fake.responses, 5)
	assert.Equal(t, workflows.Response{CallID: "call_write", Decision: "approve", By: "bo",
		Arguments: json.RawMessage(`{"path": "summary.md",` + "\n" + `"content": 1}`)}, fake.responses[0])
	assert.Equal(t, workflows.Response{CallID: "call_write", Decision: "approve", By: "bo"}, fake.responses[1])
	assert.Equal(t, workflows.Response{CallID: "call_tone", Decision: "answer", Answer: json.RawMessage(`"friendly"`), By: "bo"}, fake.responses[2])
	assert.Equal(t, workflows.Response{CallID: "call_q", Decision: "answer", Answer: json.RawMessage(`3`), By: "bo"}, fake.responses[3])
	assert.Equal(t, workflows.Response{CallID: "call_issues", Decision: "cancel", Reason: "declined the github connection", By: "bo"}, fake.responses[4])

	out := o.stdout
	for _, want := range []string{
		"call_write wants to run write_file",
		`    "path": "summary.md"`, // pretty arguments
		"please answer a, d or e",
		"rejected: the edited arguments for call call_write do not validate: content is required",
		"✓ call_write write_file: succeeded: wrote summary.md",
		"call_tone (ask_user) asks: Which tone?",
		"  2) friendly  Friendly and warm",
		`"9" is not one of the options`,
		`the answer is JSON matching: {"type":"integer"}`,
		"that is not valid JSON; try again",
		"call_issues (list_issues) needs a github connection",
		"scopes: repo",
		"how: store a token with ...",
		"turn T completed",
		"Finished without the issues.",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "→ starter approve", "interactive mode asks instead of hinting")
}

func TestInteractiveDenyWithReason(t *testing.T) {
	fake := newFake(workflows.State{Status: workflows.StatusWaiting, Cards: []results.Card{approvalCard()}})
	fake.respond = func(f *fakeTurns, r workflows.Response) (results.Card, error) {
		card := refused(approvalCard(), r.Reason)
		f.setCard(card)
		f.finishLocked(workflows.StatusCompleted, "ok")
		return card, nil
	}
	o := newHarness(t, fake).run("d\nwrong file\n", "run", "--interactive", "x")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Equal(t, workflows.Response{CallID: "call_write", Decision: "deny", Reason: "wrong file", By: "ann"}, fake.responses[0])
	assert.Contains(t, o.stdout, "refused: wrong file")
}

func TestInteractiveStopsAskingWhenTheWaitEndsElsewhere(t *testing.T) {
	// Another client answers while this one is rejected: the wait is gone,
	// so the terminal moves on instead of asking forever.
	fake := newFake(workflows.State{Status: workflows.StatusWaiting, Cards: []results.Card{approvalCard()}})
	fake.respond = func(f *fakeTurns, r workflows.Response) (results.Card, error) {
		card := approvalCard()
		card.State = results.StateRunning
		card.Decisions = []results.Decision{{Decision: "approve", By: "slack"}}
		f.setCard(card)
		f.finishLocked(workflows.StatusCompleted, "")
		return results.Card{}, &rejectedError{msg: "call call_write is running, not waiting for a response (it got approve from slack)"}
	}
	o := newHarness(t, fake).run("a\n", "run", "--interactive", "x")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Len(t, fake.responses, 1)
	assert.Contains(t, o.stdout, "rejected: call call_write is running")
	assert.Contains(t, o.stdout, "call_write is no longer waiting for this answer")
}

func TestInteractiveQuestionWithoutSchemaSendsText(t *testing.T) {
	fake := newFake(workflows.State{Status: workflows.StatusWaiting, Cards: []results.Card{questionCard("")}})
	fake.respond = func(f *fakeTurns, r workflows.Response) (results.Card, error) {
		f.finishLocked(workflows.StatusCompleted, "")
		return succeeded(questionCard(""), "ok"), nil
	}
	o := newHarness(t, fake).run("  three, please \n", "run", "--interactive", "x")
	require.Equal(t, 0, o.code, o.stderr)
	assert.JSONEq(t, `"three, please"`, string(fake.responses[0].Answer))
}

func TestInteractiveEndOfInputLeavesTheTurnWaiting(t *testing.T) {
	fake := newFake(workflows.State{Status: workflows.StatusWaiting, Cards: []results.Card{approvalCard()}})
	o := newHarness(t, fake).run("", "run", "--interactive", "--id", "T", "x")
	assert.Equal(t, 1, o.code)
	assert.Contains(t, o.stderr, "stdin closed while the turn waits for an answer; the turn keeps waiting (starter state T shows how to answer it)")
	assert.Empty(t, fake.responses)
}

func TestInteractiveJSONKeepsStdoutForJSONLines(t *testing.T) {
	fake := newFake(workflows.State{Status: workflows.StatusWaiting, Cards: []results.Card{approvalCard()}})
	fake.respond = func(f *fakeTurns, r workflows.Response) (results.Card, error) {
		card := succeeded(approvalCard(), "done")
		f.setCard(card)
		f.finishLocked(workflows.StatusCompleted, "ok")
		return card, nil
	}
	o := newHarness(t, fake).run("a\n", "--json", "run", "--interactive", "x")
	require.Equal(t, 0, o.code, o.stderr)
	for _, l := range strings.Split(strings.TrimSpace(o.stdout), "\n") {
		assert.True(t, json.Valid([]byte(l)), "not a JSON line: %q", l)
	}
	assert.Contains(t, o.stderr, "[a]pprove, [d]eny, [e]dit arguments?")
}

func TestInteractivePromptEndsWithTheTurn(t *testing.T) {
	// The turn ends (cancelled from elsewhere) while the person has not
	// answered: the prompt gives up and the result is reported.
	fake := newFake(workflows.State{Status: workflows.StatusWaiting, Cards: []results.Card{approvalCard()}})
	progress(fake, func(f *fakeTurns) {
		f.setCard(refused(approvalCard(), "the turn was cancelled"))
		f.finishLocked(workflows.StatusCancelled, "")
	})
	h := newHarness(t, fake)
	var out, errb strings.Builder
	c := newCLI(blockingReader{}, &out, &errb, func(k string) string { return h.env[k] })
	c.poll = 1
	c.dial = func(context.Context, globals) (turns, error) { return fake, nil }
	code := c.run(context.Background(), []string{"run", "--interactive", "--id", "T", "x"})
	assert.Equal(t, 1, code, errb.String())
	assert.Contains(t, out.String(), "turn T cancelled")
	assert.Contains(t, out.String(), "refused: the turn was cancelled")
}

func TestPickOption(t *testing.T) {
	opts := choiceCard().Interrupt.Options
	for in, want := range map[string]string{"1": "formal", " 3 ": "brief", "friendly": "friendly"} {
		got, ok := pickOption(opts, in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"0", "4", "Friendly", ""} {
		_, ok := pickOption(opts, in)
		assert.False(t, ok, in)
	}
}

func TestSchemaAnswer(t *testing.T) {
	got, err := schemaAnswer(json.RawMessage(`{"type":"string"}`), "Ada Lovelace")
	require.NoError(t, err)
	assert.Equal(t, `"Ada Lovelace"`, string(got))
	got, err = schemaAnswer(json.RawMessage(`{"type":"object"}`), ` {"a":1} `)
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(got))
	_, err = schemaAnswer(json.RawMessage(`{"type":"object"}`), "a=1")
	assert.Error(t, err)
}

// blockingReader never yields a line, like a terminal nobody types at.
type blockingReader struct{}

func (blockingReader) Read([]byte) (int, error) { select {} }
