package workflows

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/results"
)

// listed is the search attributes after one upsert, as the server merges
// them.
type listed struct {
	Status string
	Calls  []string
	Tools  []string
	User   string
}

func recordUpserts(h *harness) *[]listed {
	var got []listed
	var cur listed
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		if v, ok := sa.GetKeyword(StatusAttr); ok {
			cur.Status = v
		}
		if sa.ContainsKey(WaitingCallsAttr) {
			cur.Calls, _ = sa.GetKeywordList(WaitingCallsAttr)
		}
		if sa.ContainsKey(WaitingToolsAttr) {
			cur.Tools, _ = sa.GetKeywordList(WaitingToolsAttr)
		}
		if v, ok := sa.GetKeyword(UserAttr); ok {
			cur.User = v
		}
		got = append(got, cur)
	}).Return(nil)
	return &got
}

// A turn's search attributes say what it waits for, one upsert per
// change, and end with its final status and nothing waiting.
func TestSearchAttributesFollowTheWaits(t *testing.T) {
	h := newHarnessWith(t, Features{SearchAttributes: true},
		calls("", tc("w1", "write", `{"path":"a.md","content":"b"}`), tc("a1", "ask", `{"prompt":"tone?"}`)),
		results.AssistantText("done"))
	got := recordUpserts(h)
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove}, nil)
	h.respond(2*time.Minute, Response{CallID: "a1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"formal"`)}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write", "ask"}, User: "ann"})
	require.Equal(t, StatusCompleted, res.Status)

	require.Equal(t, []listed{
		{Status: "running", User: "ann"},
		{Status: "waiting", Calls: []string{"w1"}, Tools: []string{"write"}, User: "ann"},
		{Status: "waiting", Calls: []string{"w1", "a1"}, Tools: []string{"ask", "write"}, User: "ann"},
		{Status: "waiting", Calls: []string{"a1"}, Tools: []string{"ask"}, User: "ann"},
		{Status: "running", User: "ann"},
		{Status: "completed", User: "ann"},
	}, *got)
}

// Without the search attributes registered, the turn writes none (the
// server would fail every workflow task that tried).
func TestNoSearchAttributesWithoutTheFeature(t *testing.T) {
	h := newHarness(t, calls("", tc("w1", "write", `{"path":"a.md","content":"b"}`)), results.AssistantText("done"))
	got := recordUpserts(h)
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}, User: "ann"})
	require.Equal(t, StatusCompleted, res.Status)
	require.Empty(t, *got)
}

// A model that makes hundreds of calls with long ids cannot push an
// upsert past the server's value limits.
func TestWaitingCallsListIsBounded(t *testing.T) {
	var many []results.ToolCall
	for i := range 200 {
		many = append(many, tc(strings.Repeat("x", 40)+string(rune('a'+i%26))+strings.Repeat("y", i%7), "write", `{"path":"a","content":"b"}`))
	}
	h := newHarnessWith(t, Features{SearchAttributes: true}, calls("", many...), results.AssistantText("done"))
	got := recordUpserts(h)
	h.env.RegisterDelayedCallback(func() { h.env.CancelWorkflow() }, time.Minute)
	h.run(t, Input{Prompt: "p", Tools: []string{"write"}, User: strings.Repeat("é", 400)})
	var longest int
	for _, l := range *got {
		require.LessOrEqual(t, len(l.Calls), maxListedCalls)
		require.LessOrEqual(t, len(strings.Join(l.Calls, "")), maxListedBytes)
		require.LessOrEqual(t, len(l.User), maxUserAttrBytes)
		longest = max(longest, len(l.Calls))
	}
	require.Positive(t, longest, "the first waiting calls are listed")
}

// A turn that fails in setup (it names a tool the worker does not offer)
// is listed and reads as failed, with why, not as the running turn setup
// had listed.
func TestATurnThatFailsInSetupEndsFailed(t *testing.T) {
	h := newHarnessWith(t, Features{SearchAttributes: true})
	got := recordUpserts(h)
	h.env.ExecuteWorkflow(WorkflowName, Input{Prompt: "p", Model: "m", Tools: []string{"echo", "nope"}, User: "ann"})
	require.ErrorContains(t, h.env.GetWorkflowError(), "unknown tool(s) nope")
	require.Equal(t, []listed{
		{Status: "running", User: "ann"},
		{Status: "failed", User: "ann"},
	}, *got)
	s := h.state(t)
	require.Equal(t, StatusFailed, s.Status)
	require.Contains(t, s.Error, "the turn could not start: unknown tool(s) nope; this worker offers:")
}
