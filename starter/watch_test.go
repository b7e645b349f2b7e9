package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// progress moves the fake through states about 20 ms apart, as a worker
// would, once the state before has been read.
func progress(f *fakeTurns, steps ...func(f *fakeTurns)) {
	go func() {
		read := 0
		for _, step := range steps {
			time.Sleep(20 * time.Millisecond)
			// Each state is read at least once before the next replaces
			// it, however slowly a loaded machine runs the reader.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				f.mu.Lock()
				n := len(f.runIDs)
				f.mu.Unlock()
				if n > read {
					break
				}
			}
			f.mu.Lock()
			step(f)
			read = len(f.runIDs)
			f.mu.Unlock()
		}
	}()
}

func readCard() results.Card {
	return results.Card{CallID: "call_read", Tool: "read_file", State: results.StateRunning, Arguments: json.RawMessage(`{"path":"notes.txt"}`)}
}

func TestWatchPrintsCardChangesThenTheResult(t *testing.T) {
	fake := newFake(workflows.State{Status: workflows.StatusRunning, Step: 1, Cards: []results.Card{readCard()}})
	progress(fake,
		func(f *fakeTurns) { f.setCard(succeeded(readCard(), "the notes")) },
		func(f *fakeTurns) {
			f.state.Step = 2
			f.setCard(approvalCard())
			f.state.Status = workflows.StatusWaiting
		},
		func(f *fakeTurns) { f.state.Status = workflows.StatusRunning; f.setCard(refused(approvalCard(), "no")) },
		func(f *fakeTurns) { f.state.Step = 3; f.finishLocked(workflows.StatusCompleted, "All done.") },
	)
	o := newHarness(t, fake).run("", "watch", "T")
	require.Equal(t, 0, o.code, o.stderr)
	// Each card line appears once per change, in order.
	wantOrder := []string{
		"· step 1: running",
		"… call_read read_file: running",
		"✓ call_read read_file: succeeded: the notes",
		"? call_write write_file: pending approval",
		"→ starter approve T call_write",
		"⊘ call_write write_file: refused: no",
		"turn T completed after 3 step(s)",
		"All done.",
		"calls:",
	}
	last := -1
	for _, w := range wantOrder {
		i := strings.Index(o.stdout, w)
		require.GreaterOrEqual(t, i, 0, "missing %q in:\n%s", w, o.stdout)
		assert.Greater(t, i, last, "%q out of order in:\n%s", w, o.stdout)
		last = i
	}
	live, _, _ := strings.Cut(o.stdout, "turn T completed")
	assert.Equal(t, 1, strings.Count(live, "call_read read_file: succeeded"), "an unchanged card is not printed again:\n%s", o.stdout)
}

func TestWatchExitCodeFollowsTheStatus(t *testing.T) {
	for status, code := range map[workflows.Status]int{
		workflows.StatusCompleted:   0,
		workflows.StatusTransferred: 3,
		workflows.StatusFailed:      1,
		workflows.StatusCancelled:   1,
		workflows.StatusMaxSteps:    1,
	} {
		fake := newFake(workflows.State{Status: workflows.StatusRunning})
		progress(fake, func(f *fakeTurns) { f.finishLocked(status, "") })
		o := newHarness(t, fake).run("", "watch", "T")
		assert.Equal(t, code, o.code, status)
		assert.Contains(t, o.stdout, "turn T "+string(status), status)
	}
}

func TestWatchJSONLines(t *testing.T) {
	fake := newFake(workflows.State{Status: workflows.StatusRunning, Step: 1, Cards: []results.Card{readCard()}})
	progress(fake, func(f *fakeTurns) {
		f.setCard(succeeded(readCard(), "x"))
		f.finishLocked(workflows.StatusTransferred, "")
		f.result.Transfer = &results.Transfer{Target: "billing"}
	})
	o := newHarness(t, fake).run("", "--json", "watch", "T")
	assert.Equal(t, 3, o.code)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	var types []string
	for _, l := range lines {
		assert.True(t, strings.HasPrefix(l, `{"type":"`), "type comes first: %s", l)
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &v), l)
		types = append(types, v["type"].(string))
	}
	assert.Equal(t, "status", types[0])
	assert.Contains(t, types, "card")
	assert.Equal(t, "result", types[len(types)-1])
	var last struct {
		Result workflows.Result `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	assert.Equal(t, "billing", last.Result.Transfer.Target)
}

func TestWatchKeepsWaitingThroughQueryErrors(t *testing.T) {
	defer func(p time.Duration) { queryPatience = p }(queryPatience)
	queryPatience = 0
	fake := newFake(workflows.State{})
	fake.stateErr = errors.New("no worker answered the state query")
	progress(fake, func(f *fakeTurns) { f.stateErr = nil; f.state.Status = workflows.StatusRunning },
		func(f *fakeTurns) { f.finishLocked(workflows.StatusCompleted, "ok") })
	o := newHarness(t, fake).run("", "watch", "T")
	assert.Equal(t, 0, o.code)
	assert.Equal(t, 1, strings.Count(o.stderr, "no worker answered"), "a repeated problem is reported once:\n%s", o.stderr)
}

func TestWatchOfAFailedTurnExitsOne(t *testing.T) {
	fake := newFake(workflows.State{})
	fake.stateErr = errors.New("unknown queryType state")
	fake.resultErr = errors.New("the turn T ended without a result: invalid turn input: the turn names no model")
	close(fake.done)
	o := newHarness(t, fake).run("", "watch", "T")
	assert.Equal(t, 1, o.code)
	assert.Contains(t, o.stderr, "invalid turn input")
}

func TestRunWaitJSONPrintsOnlyTheResult(t *testing.T) {
	fake := newFake(workflows.State{Status: workflows.StatusRunning, Cards: []results.Card{readCard()}})
	progress(fake, func(f *fakeTurns) { f.finishLocked(workflows.StatusCompleted, "Done.") })
	o := newHarness(t, fake).run("", "--json", "run", "--wait", "--id", "T", "go")
	require.Equal(t, 0, o.code, o.stderr)
	var res workflows.Result
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &res), o.stdout)
	assert.Equal(t, workflows.StatusCompleted, res.Status)
	assert.Equal(t, "Done.", res.Text)
	assert.Equal(t, []string{"run-1"}, uniq(fake.runIDs), "the started run is the one followed")
}

func TestPrintResultSummary(t *testing.T) {
	at := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)
	res := workflows.Result{
		Status: workflows.StatusFailed, Steps: 2, Text: "Partial answer.", Error: "the model provider is down", InvalidSignals: 2,
		Usage: model.Usage{InputTokens: 1200, OutputTokens: 34}, Cost: 0.0125, Compactions: 1,
		Cards: []results.Card{
			{CallID: "c1", Tool: "write_file", State: results.StateSucceeded, Arguments: json.RawMessage(`{}`),
				EditedArguments: json.RawMessage(`{"path":"b"}`),
				Decisions:       []results.Decision{{Decision: "approve", By: "ann", At: at, Arguments: json.RawMessage(`{"path":"b"}`)}}},
			{CallID: "c2", Tool: "ask_user", State: results.StateRefused, Reason: "no response within 24h", Arguments: json.RawMessage(`{}`),
				Decisions: []results.Decision{{Decision: "timeout", By: "tollgate", At: at, Reason: "no response within 24h"}}},
			{CallID: "c3", Tool: "ask_user", State: results.StateFailed, Arguments: json.RawMessage(`{}`),
				Failure: &results.Failure{Reason: results.FailureInternal, Ref: "ref-1", Detail: "secret stack trace"}},
			{CallID: "c4", Tool: "ask_user", State: results.StateSucceeded, Arguments: json.RawMessage(`{}`),
				Decisions: []results.Decision{{Decision: "answer", By: "bo", At: at, Answer: json.RawMessage(`"friendly"`)}}},
		},
	}
	var b bytes.Buffer
	printResult(&b, "T", res)
	out := b.String()
	for _, want := range []string{
		"turn T failed after 2 step(s)",
		"used: 1234 tokens (1200 in, 34 out), $0.0125, 1 compaction(s)",
		"error: the model provider is down",
		"Partial answer.",
		"✓ c1 write_file: succeeded silently",
		"approve by ann at 2025-05-06T07:08:09Z with edited arguments",
		"⊘ c2 ask_user: refused: no response within 24h",
		"timeout by tollgate at 2025-05-06T07:08:09Z (no response within 24h)",
		"✗ c3 ask_user: failed: internal error (ref ref-1)",
		`answer by bo at 2025-05-06T07:08:09Z: "friendly"`,
		"2 respond signal(s) were dropped as invalid",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "secret stack trace", "internal error detail stays out of the summary")

	b.Reset()
	printResult(&b, "T", workflows.Result{Status: workflows.StatusTransferred, Steps: 1, Transfer: &results.Transfer{Target: "billing", Message: "over to you"}})
	assert.Contains(t, b.String(), "turn T transferred after 1 step(s), handed to billing")
	assert.Contains(t, b.String(), "transfer message: over to you")
	assert.NotContains(t, b.String(), "used:", "a turn that used nothing says nothing of it")
}

func TestHints(t *testing.T) {
	assert.Equal(t, `starter approve T call_write   or   starter deny T call_write --reason "..."`, hint("T", approvalCard()))
	assert.Equal(t, "starter answer T call_tone {formal|friendly|brief}", hint("T", choiceCard()))
	assert.Equal(t, `starter answer T call_q "..."`, hint("T", questionCard("")))
	assert.Equal(t, "starter answer T call_q --json-answer 'JSON'", hint("T", questionCard(`{"type":"integer"}`)))
	assert.Equal(t, "starter connected T call_issues   or   starter cancel T call_issues", hint("T", connectionCard()))
}

func uniq(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
