package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/codec"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/workflows"
)

func TestParseTakesFlagsAnywhere(t *testing.T) {
	tests := []struct {
		args    []string
		pos     []string
		by, why string
	}{
		{[]string{"ID", "CALL", "--by", "bo", "--reason", "no"}, []string{"ID", "CALL"}, "bo", "no"},
		{[]string{"--by", "bo", "ID", "CALL"}, []string{"ID", "CALL"}, "bo", ""},
		{[]string{"ID", "--by=bo", "CALL"}, []string{"ID", "CALL"}, "bo", ""},
		{[]string{"ID", "--", "CALL", "--by", "bo"}, []string{"ID", "CALL", "--by", "bo"}, "", ""},
		{[]string{"-reason", "x y", "ID"}, []string{"ID"}, "", "x y"},
		{nil, nil, "", ""},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var by, why string
		fs.StringVar(&by, "by", "", "")
		fs.StringVar(&why, "reason", "", "")
		pos, err := parse(fs, tt.args)
		require.NoError(t, err, tt.args)
		assert.Equal(t, tt.pos, pos, tt.args)
		assert.Equal(t, tt.by, by, tt.args)
		assert.Equal(t, tt.why, why, tt.args)
	}
}

func TestParseErrors(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	_, err := parse(fs, []string{"ID", "--nope"})
	var u *usageError
	require.ErrorAs(t, err, &u)
	assert.Contains(t, u.msg, "nope")

	_, err = parse(fs, []string{"ID", "-h"})
	assert.ErrorIs(t, err, flag.ErrHelp)
}

func TestEncodeAnswer(t *testing.T) {
	tests := []struct {
		in   string
		raw  bool
		want string
		bad  bool
	}{
		{"friendly", false, `"friendly"`, false},
		{`say "hi"`, false, `"say \"hi\""`, false},
		{"42", false, `"42"`, false},
		{"", false, `""`, false},
		{`{"n": 3}`, true, `{"n": 3}`, false},
		{"42", true, "42", false},
		{"friendly", true, "", true},
	}
	for _, tt := range tests {
		got, err := encodeAnswer(tt.in, tt.raw)
		if tt.bad {
			var u *usageError
			assert.ErrorAs(t, err, &u, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, string(got), tt.in)
	}
}

func TestStatusExit(t *testing.T) {
	assert.Equal(t, 0, statusExit(workflows.StatusCompleted))
	assert.Equal(t, 3, statusExit(workflows.StatusTransferred))
	for _, s := range []workflows.Status{workflows.StatusFailed, workflows.StatusCancelled, workflows.StatusMaxSteps, "something new"} {
		assert.Equal(t, 1, statusExit(s), s)
	}
}

func TestHelpAndUsageExitCodes(t *testing.T) {
	h := newHarness(t, newFake(workflows.State{}))

	o := h.run("", "help")
	assert.Equal(t, 0, o.code)
	for _, v := range verbs {
		assert.Contains(t, o.stdout, v.example, "usage lists %s with an example", v.name)
	}
	assert.Contains(t, o.stdout, `temporal workflow update execute --name respond --workflow-id ID`)
	assert.Contains(t, o.stdout, `--input '{"call_id":"call_write_summary","decision":"approve"}'`)
	assert.Contains(t, o.stdout, `temporal workflow query --type state --workflow-id ID`)
	assert.Contains(t, o.stdout, "3    the turn ended by transferring")

	assert.Equal(t, 0, h.run("", "-h").code)
	o = h.run("", "help", "answer")
	assert.Equal(t, 0, o.code)
	assert.Contains(t, o.stdout, "usage: starter answer ID CALL ANSWER")
	assert.Contains(t, o.stdout, "-json-answer")
	assert.NotContains(t, o.stdout, "-namespace", "global flags are listed once, in starter help")
	o = h.run("", "deny", "-h")
	assert.Equal(t, 0, o.code)
	assert.Contains(t, o.stdout, "usage: starter deny")

	o = h.run("")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "usage: starter")
	o = h.run("", "frobnicate")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, `unknown verb "frobnicate"`)
	o = h.run("", "approve", "ID")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "missing ID and CALL")
	o = h.run("", "approve", "ID", "CALL", "extra")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, `unexpected argument "extra"`)
	o = h.run("", "state", "ID", "--bogus")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "bogus")
	assert.Equal(t, 0, h.dialN, "usage errors never dial")
}

func TestGlobalFlagsBeforeOrAfterTheVerbAndFromTheEnvironment(t *testing.T) {
	h := newHarness(t, newFake(workflows.State{Status: workflows.StatusRunning}))
	h.env["TOLLGATE_TASK_QUEUE"] = "tq-env"
	h.env["TOLLGATE_DATA"] = "/data-env"
	require.Equal(t, 0, h.run("", "--address", "a:1", "state", "ID", "--namespace", "ns").code)
	assert.Equal(t, globals{address: "a:1", namespace: "ns", taskQueue: "tq-env", dataDir: "/data-env"}, h.dialed)

	require.Equal(t, 0, h.run("", "--task-queue", "q1", "state", "--json", "ID").code)
	assert.Equal(t, "q1", h.dialed.taskQueue)
	assert.True(t, h.dialed.json)
}

func TestDialErrorExitsOneNamingTheAddress(t *testing.T) {
	h := newHarness(t, nil)
	h.dialFn = func() (turns, error) {
		return nil, errors.New("cannot connect to Temporal at 10.0.0.9:7233 (namespace default): refused")
	}
	o := h.run("", "--address", "10.0.0.9:7233", "state", "ID")
	assert.Equal(t, 1, o.code)
	assert.Contains(t, o.stderr, "10.0.0.9:7233")
}

func TestRunStartsAndPrintsTheID(t *testing.T) {
	fake := newFake(workflows.State{})
	h := newHarness(t, fake)
	o := h.run("", "run", "Summarise notes.txt", "--id", "turn-1")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Equal(t, "turn-1\n", o.stdout)
	assert.Contains(t, o.stderr, "starter watch turn-1")
	require.Len(t, fake.started, 1)
	s := fake.started[0]
	assert.Equal(t, "turn-1", s.id)
	assert.Equal(t, workflows.DefaultTaskQueue, s.taskQueue)
	assert.Equal(t, workflows.Input{Prompt: "Summarise notes.txt", Model: "scripted:demo", Tools: []string{"read_file", "write_file", "ask_user"}, User: "ann"}, s.in)
	assert.True(t, fake.closed)

	o = h.run("", "--json", "run", "hello")
	require.Equal(t, 0, o.code, o.stderr)
	var got map[string]string
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &got))
	assert.Equal(t, "run-1", got["run_id"])
	assert.True(t, strings.HasPrefix(got["workflow_id"], "tollgate-"), got["workflow_id"])
	assert.Len(t, got["workflow_id"], len("tollgate-")+8)
}

func TestRunFlagsBuildTheInput(t *testing.T) {
	fake := newFake(workflows.State{})
	h := newHarness(t, fake)
	o := h.run("", "run", "--model", "openai:gpt-4.1", "--tools", "read_file, shell", "--approve", "read_file",
		"--approve", "shell,http_fetch", "--timeout", "7d", "--max-steps", "4", "--system", "be terse",
		"--user", "bo", "--task-queue", "q2", "do it")
	require.Equal(t, 0, o.code, o.stderr)
	s := fake.started[0]
	assert.Equal(t, "q2", s.taskQueue)
	assert.Equal(t, workflows.Input{
		Prompt: "do it", Model: "openai:gpt-4.1", System: "be terse", User: "bo", MaxSteps: 4,
		Tools: []string{"read_file", "shell"},
		Policy: workflows.Policy{
			Approval:        map[string]string{"read_file": "always", "shell": "always", "http_fetch": "always"},
			ResponseTimeout: workflows.Duration(7 * 24 * time.Hour),
		},
	}, s.in)

	// Another model gets no tools unless asked; no $USER means "cli".
	delete(h.env, "USER")
	require.Equal(t, 0, h.run("", "run", "--model", "anthropic:claude", "hi").code)
	assert.Nil(t, fake.started[1].in.Tools)
	assert.Equal(t, "cli", fake.started[1].in.User)
}

func TestRunInputFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "in.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"prompt":"from file","model":"ollama:llama3.2","tools":["list_dir"],
		"policy":{"approval":{"list_dir":"always"},"response_timeout":"2d"},"max_steps":3,"user":"carol"}`), 0o644))
	fake := newFake(workflows.State{})
	h := newHarness(t, fake)

	require.Equal(t, 0, h.run("", "run", "--input", file).code)
	assert.Equal(t, workflows.Input{Prompt: "from file", Model: "ollama:llama3.2", Tools: []string{"list_dir"}, MaxSteps: 3, User: "carol",
		Policy: workflows.Policy{Approval: map[string]string{"list_dir": "always"}, ResponseTimeout: workflows.Duration(48 * time.Hour)}}, fake.started[0].in)

	// Explicit flags and the prompt argument win; defaults do not.
	require.Equal(t, 0, h.run("", "run", "--input", file, "--max-steps", "9", "--approve", "shell", "new prompt").code)
	in := fake.started[1].in
	assert.Equal(t, "new prompt", in.Prompt)
	assert.Equal(t, "ollama:llama3.2", in.Model)
	assert.Equal(t, 9, in.MaxSteps)
	assert.Equal(t, map[string]string{"list_dir": "always", "shell": "always"}, in.Policy.Approval)

	// From stdin.
	require.Equal(t, 0, h.run(`{"prompt":"piped","model":"scripted:demo"}`, "run", "--input", "-").code)
	assert.Equal(t, "piped", fake.started[2].in.Prompt)
	assert.Equal(t, "ann", fake.started[2].in.User)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"prompt":"x","max_step":3}`), 0o644))
	o := h.run("", "run", "--input", bad)
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "max_step")
	o = h.run("", "run", "--input", filepath.Join(dir, "missing.json"))
	assert.Equal(t, 2, o.code)
	o = h.run("", "run", "--input", "-", "--interactive")
	assert.Equal(t, 2, o.code)
	assert.Len(t, fake.started, 3)
}

func TestRunUsageErrors(t *testing.T) {
	h := newHarness(t, newFake(workflows.State{}))
	for _, args := range [][]string{
		{"run"},
		{"run", "a", "b"},
		{"run", "--timeout", "soon", "x"},
		{"run", "--timeout", "-1h", "x"},
		{"run", "--timeout", "-2d", "x"},
		{"run", "--timeout", "1.5d", "x"},
		{"run", "--max-steps", "0", "x"},
		{"run", "--model", "", "x"},
	} {
		o := h.run("", args...)
		assert.Equal(t, 2, o.code, args)
		assert.Contains(t, o.stderr, "starter run:", args)
	}
	assert.Equal(t, 0, h.dialN)
}

func TestRunStartErrorExitsOne(t *testing.T) {
	fake := newFake(workflows.State{})
	fake.startErr = errors.New("a turn with id t1 is already running; pick another --id")
	o := newHarness(t, fake).run("", "run", "--id", "t1", "x")
	assert.Equal(t, 1, o.code)
	assert.Contains(t, o.stderr, "already running")
}

func TestRespondVerbsSendTheUpdate(t *testing.T) {
	fake := newFake(workflows.State{Status: workflows.StatusWaiting, Cards: []results.Card{approvalCard()}})
	fake.respond = func(f *fakeTurns, r workflows.Response) (results.Card, error) {
		return results.Card{CallID: r.CallID, Tool: "write_file", State: results.StateRunning}, nil
	}
	h := newHarness(t, fake)
	tests := []struct {
		args []string
		want workflows.Response
	}{
		{[]string{"approve", "T", "call_write"}, workflows.Response{CallID: "call_write", Decision: "approve", By: "ann"}},
		{[]string{"approve", "T", "call_write", "--args", `{"path":"other.md"}`, "--by", "bo", "--reason", "ok"},
			workflows.Response{CallID: "call_write", Decision: "approve", By: "bo", Reason: "ok", Arguments: json.RawMessage(`{"path":"other.md"}`)}},
		{[]string{"approve", "T", "call_write", "--by", "bo", "--groups", "leads, ops"}, workflows.Response{CallID: "call_write", Decision: "approve", By: "bo", Groups: []string{"leads", "ops"}}},
		{[]string{"deny", "T", "call_write", "--reason", "not that file"}, workflows.Response{CallID: "call_write", Decision: "deny", Reason: "not that file", By: "ann"}},
		{[]string{"answer", "T", "call_tone", "friendly"}, workflows.Response{CallID: "call_tone", Decision: "answer", Answer: json.RawMessage(`"friendly"`), By: "ann"}},
		{[]string{"answer", "--json-answer", "T", "call_q", `{"n":3}`}, workflows.Response{CallID: "call_q", Decision: "answer", Answer: json.RawMessage(`{"n":3}`), By: "ann"}},
		{[]string{"connected", "T", "call_issues"}, workflows.Response{CallID: "call_issues", Decision: "connected", By: "ann"}},
		{[]string{"cancel", "T", "call_issues", "--reason", "later"}, workflows.Response{CallID: "call_issues", Decision: "cancel", Reason: "later", By: "ann"}},
	}
	for i, tt := range tests {
		o := h.run("", tt.args...)
		require.Equal(t, 0, o.code, "%v: %s", tt.args, o.stderr)
		require.Len(t, fake.responses, i+1)
		assert.Equal(t, tt.want, fake.responses[i], tt.args)
		assert.Contains(t, o.stdout, ": running", tt.args)
	}
	assert.Empty(t, fake.signals)

	o := h.run("", "--json", "approve", "T", "call_write", "--run", "r9")
	require.Equal(t, 0, o.code)
	var card results.Card
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &card))
	assert.Equal(t, results.StateRunning, card.State)
	assert.Equal(t, "r9", fake.runIDs[len(fake.runIDs)-1])
}

func TestRespondArgsFromFileAndBadJSON(t *testing.T) {
	fake := newFake(workflows.State{})
	h := newHarness(t, fake)
	file := filepath.Join(t.TempDir(), "args.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"path": "x.md"}`), 0o644))
	require.Equal(t, 0, h.run("", "approve", "T", "C", "--args", "@"+file).code)
	assert.JSONEq(t, `{"path":"x.md"}`, string(fake.responses[0].Arguments))

	o := h.run("", "approve", "T", "C", "--args", "{nope")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "--args is not valid JSON")
	o = h.run("", "answer", "T", "C", "plain", "--json-answer")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "not valid JSON")
	assert.Len(t, fake.responses, 1)
}

func TestRejectedResponseExitsTwoWithTheSentence(t *testing.T) {
	fake := newFake(workflows.State{})
	fake.respond = func(*fakeTurns, workflows.Response) (results.Card, error) {
		return results.Card{}, &rejectedError{msg: `there is no call "call_x" in this turn; waiting: call_write`}
	}
	o := newHarness(t, fake).run("", "approve", "T", "call_x")
	assert.Equal(t, 2, o.code)
	assert.Equal(t, "rejected: there is no call \"call_x\" in this turn; waiting: call_write\n", o.stderr)
	assert.Empty(t, o.stdout)
}

func TestRespondSignal(t *testing.T) {
	fake := newFake(workflows.State{})
	h := newHarness(t, fake)
	o := h.run("", "deny", "T", "call_write", "--reason", "no", "--signal")
	require.Equal(t, 0, o.code)
	assert.Empty(t, fake.responses)
	assert.Equal(t, []workflows.Response{{CallID: "call_write", Decision: "deny", Reason: "no", By: "ann"}}, fake.signals)
	assert.Contains(t, o.stdout, "as a signal")

	o = h.run("", "--json", "connected", "T", "c1", "--signal")
	require.Equal(t, 0, o.code)
	assert.JSONEq(t, `{"workflow_id":"T","call_id":"c1","signal_sent":true}`, o.stdout)
}

func TestCancelTheWholeTurn(t *testing.T) {
	fake := newFake(workflows.State{})
	h := newHarness(t, fake)
	o := h.run("", "cancel", "T")
	require.Equal(t, 0, o.code)
	assert.Equal(t, []string{"T"}, fake.cancels)
	assert.Empty(t, fake.responses)
	assert.Contains(t, o.stdout, "cancellation of T requested")

	o = h.run("", "--json", "cancel", "T")
	require.Equal(t, 0, o.code)
	assert.JSONEq(t, `{"workflow_id":"T","cancel_requested":true}`, o.stdout)

	o = h.run("", "cancel", "T", "--reason", "x")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "go with cancel ID CALL")
	assert.Len(t, fake.cancels, 2)
}

func TestStatePrintsCardsAndHowToAnswer(t *testing.T) {
	s := workflows.State{Status: workflows.StatusWaiting, Step: 2, Cards: []results.Card{
		succeeded(results.Card{CallID: "call_read", Tool: "read_file", Arguments: json.RawMessage(`{}`)}, "the notes"),
		approvalCard(), choiceCard(), connectionCard(),
	}, InvalidSignals: 1, LastInvalidSignal: "the response names no call_id"}
	h := newHarness(t, newFake(s))
	o := h.run("", "state", "T")
	require.Equal(t, 0, o.code, o.stderr)
	for _, want := range []string{
		"turn T: waiting, step 2, 4 call(s)",
		"call_read read_file: succeeded: the notes",
		"call_write write_file: pending approval",
		"starter approve T call_write",
		"starter answer T call_tone {formal|friendly|brief}",
		"starter connected T call_issues",
		"1 respond signal(s) were dropped as invalid; the last because: the response names no call_id",
	} {
		assert.Contains(t, o.stdout, want)
	}

	o = h.run("", "state", "T", "--json")
	require.Equal(t, 0, o.code)
	var got workflows.State
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &got))
	assert.Equal(t, s.Status, got.Status)
	assert.Len(t, got.Cards, 4)
	assert.Equal(t, 1, got.InvalidSignals)
}

// A long turn's state shows its recent cards and counts the others.
func TestStateOfALongTurnCountsTheCardsNotShown(t *testing.T) {
	s := workflows.State{Status: workflows.StatusRunning, Step: 350, Runs: 3,
		Cards:   []results.Card{succeeded(results.Card{CallID: "call_350_1", Tool: "read_file", Arguments: json.RawMessage(`{}`)}, "the notes")},
		Omitted: &workflows.CardCounts{Total: 349, ByState: map[results.State]int{results.StateSucceeded: 348, results.StateFailed: 1}}}
	o := newHarness(t, newFake(s)).run("", "state", "T")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, "turn T: running, step 350, 350 call(s) in 3 runs\n  349 earlier call(s) not shown (1 failed, 348 succeeded); the last 1 follow\n")
}

// The turns of called agents print under the calls that ran them, down
// the chain, and a child's waiting call is answered through the top turn.
func TestStatePrintsTheTreeOfAgentTurns(t *testing.T) {
	agentCard := func(id, name, turn string, chain ...string) results.Card {
		return results.Card{CallID: id, Tool: "agent_" + name, Arguments: json.RawMessage(`{"task":"t"}`), State: results.StateRunning,
			Agent: &results.AgentCall{Name: name, Turn: turn, Chain: chain}}
	}
	fake := newFake(workflows.State{Status: workflows.StatusWaiting, Step: 1, Cards: []results.Card{agentCard("c1", "billing", "T/c1", "triage", "billing")}})
	fake.children = map[string]workflows.State{
		"T/c1": {Status: workflows.StatusWaiting, Step: 2, Cards: []results.Card{
			agentCard("r1", "researcher", "T/c1/r1", "triage", "billing", "researcher"),
			{CallID: "p1", Tool: "issue_refund", Arguments: json.RawMessage(`{}`), State: results.StatePendingApproval},
		}},
		"T/c1/r1": {Status: workflows.StatusCompleted, Step: 2, Cards: []results.Card{
			succeeded(results.Card{CallID: "l1", Tool: "lookup_order", Arguments: json.RawMessage(`{}`)}, "order 7"),
		}},
	}
	o := newHarness(t, fake).run("", "state", "T")
	require.Equal(t, 0, o.code, o.stderr)
	want := "turn T: waiting, step 1, 1 call(s)\n" +
		"  running            c1 agent_billing: running\n" +
		"    c1: agent billing (triage → billing), turn T/c1: waiting, step 2, 2 call(s)\n"
	require.True(t, strings.HasPrefix(o.stdout, want), o.stdout)
	for _, s := range []string{
		"      pending_approval   p1 issue_refund: pending approval",
		"→ starter approve T c1/p1",
		"        r1: agent researcher (triage → billing → researcher), turn T/c1/r1: completed, step 2, 1 call(s)",
		"          succeeded          l1 lookup_order: succeeded: order 7",
	} {
		assert.Contains(t, o.stdout, s)
	}
}

func TestStateOfAFailedTurnSaysWhy(t *testing.T) {
	o := newHarness(t, newFake(workflows.State{Status: workflows.StatusFailed, Error: "the turn could not start: unknown tool(s) nope"})).run("", "state", "T")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, "turn T: failed, step 0, 0 call(s)\n  error: the turn could not start: unknown tool(s) nope\n")
}

func TestStateQueryErrorExitsOne(t *testing.T) {
	fake := newFake(workflows.State{})
	fake.stateErr = errors.New("no turn T in namespace default at 127.0.0.1:7233")
	o := newHarness(t, fake).run("", "state", "T")
	assert.Equal(t, 1, o.code)
	assert.Contains(t, o.stderr, "starter state: no turn T")
}

func TestHistoryWritesToStdoutOrAFile(t *testing.T) {
	fake := newFake(workflows.State{})
	fake.history = "{\n  \"events\": []\n}\n"
	h := newHarness(t, fake)
	o := h.run("", "history", "T")
	require.Equal(t, 0, o.code)
	assert.Equal(t, fake.history, o.stdout)

	file := filepath.Join(t.TempDir(), "turn.json")
	o = h.run("", "history", "T", "-o", file)
	require.Equal(t, 0, o.code, o.stderr)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, fake.history, string(b))
	assert.Contains(t, o.stdout, "starter replay "+file)
	entries, _ := os.ReadDir(filepath.Dir(file))
	assert.Len(t, entries, 1, "no temporary file is left behind")
}

// --all-runs writes every run of a turn that continued as new, in order.
func TestHistoryWritesEveryRun(t *testing.T) {
	fake := newFake(workflows.State{})
	fake.history = "history of "
	fake.runs = []string{"r1", "r2", "r3"}
	h := newHarness(t, fake)
	dir := filepath.Join(t.TempDir(), "runs")
	o := h.run("", "history", "T/1", "--all-runs", dir)
	require.Equal(t, 0, o.code, o.stderr)
	assert.Contains(t, o.stdout, "wrote 3 runs of T/1 to "+dir)
	for file, want := range map[string]string{"T_1.json": "history of r1", "T_1.run2.json": "history of r2", "T_1.run3.json": "history of r3"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		assert.Equal(t, want, string(b))
	}
	o = h.run("", "history", "T", "--all-runs", dir, "--run", "r1")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "does not go with --run or -o")
}

func TestReplayVerb(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("not json"), 0o644))
	h := newHarness(t, nil)
	o := h.run("", "replay", "--data", t.TempDir(), bad, filepath.Join(dir, "missing.json"))
	assert.Equal(t, 1, o.code)
	assert.Contains(t, o.stdout, "FAIL  "+bad)
	assert.Contains(t, o.stdout, "0 of 2 replayed cleanly")
	assert.Equal(t, 0, h.dialN, "replay needs no server")

	o = h.run("", "--json", "replay", "--data", t.TempDir(), bad)
	assert.Equal(t, 1, o.code)
	var got []map[string]any
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &got))
	require.Len(t, got, 1)
	assert.Equal(t, false, got[0]["ok"])
	assert.Equal(t, bad, got[0]["file"])

	assert.Equal(t, 2, h.run("", "replay").code)
}

func TestConnectStoresTheTokenWithoutEchoingIt(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	c := newCLI(strings.NewReader("s3cret-token\n"), &stdout, &stderr, func(k string) string {
		if k == "USER" {
			return "ada"
		}
		return ""
	})
	code := c.run(context.Background(), []string{"--data", dir, "connect", "github", "--scopes", "repo, read:org"})
	require.Equal(t, exitOK, code, stderr.String())
	require.NotContains(t, stdout.String()+stderr.String(), "s3cret-token")

	store, err := connections.NewFileStore(datadir.Connections(dir))
	require.NoError(t, err)
	cred, err := store.Get(context.Background(), "ada", "github")
	require.NoError(t, err)
	require.Equal(t, "s3cret-token", cred.Token)
	require.Equal(t, []string{"repo", "read:org"}, cred.Scopes)

	c = newCLI(strings.NewReader(""), &stdout, &stderr, func(string) string { return "" })
	require.Equal(t, exitRejected, c.run(context.Background(), []string{"--data", dir, "connect", "github", "--token-env", "NOPE"}))
	require.Contains(t, stderr.String(), "environment variable NOPE is empty")
}

// With the codec keys set, the token the starter stores is sealed, as the
// worker's and the gateway's are, and they read it with the same keys.
func TestConnectSealsTheTokenWithTheCodecKeys(t *testing.T) {
	dir := t.TempDir()
	key, err := codec.NewKey("k1")
	require.NoError(t, err)
	keysFile := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keysFile, []byte(key.Line()+"\n"), 0o600))
	getenv := func(k string) string {
		switch k {
		case "USER":
			return "ada"
		case codec.EnvKeysFile:
			return keysFile
		}
		return ""
	}
	var stdout, stderr bytes.Buffer
	c := newCLI(strings.NewReader("s3cret-token\n"), &stdout, &stderr, getenv)
	require.Equal(t, exitOK, c.run(context.Background(), []string{"--data", dir, "connect", "github"}), stderr.String())

	err = filepath.WalkDir(datadir.Connections(dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NotContains(t, string(b), "s3cret-token", "the token is at rest in plain text in %s", p)
		return nil
	})
	require.NoError(t, err)
	store, err := clientconfig.Connections(dir, getenv)
	require.NoError(t, err)
	cred, err := store.Get(context.Background(), "ada", "github")
	require.NoError(t, err)
	require.Equal(t, "s3cret-token", cred.Token)
}

func TestRunWithAnAgentLeavesItsModelAndToolsToIt(t *testing.T) {
	f := &fakeTurns{}
	o := newHarness(t, f).run("", "run", "--agent", "billing", "refund order 7")
	require.Equal(t, 0, o.code, o.stderr)
	in := f.started[0].in
	require.Equal(t, "billing", in.Agent)
	require.Empty(t, in.Model)
	require.Nil(t, in.Tools)

	f = &fakeTurns{}
	o = newHarness(t, f).run("", "run", "--agent", "billing", "--tools", "refund", "--model", "openai:gpt-4.1", "refund order 7")
	require.Equal(t, 0, o.code, o.stderr)
	require.Equal(t, []string{"refund"}, f.started[0].in.Tools)
	require.Equal(t, "openai:gpt-4.1", f.started[0].in.Model)
}
