package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

// A call waiting for approval shows what it would change, and keeps
// showing it after the decision.
func TestApprovalCardShowsWhatTheCallWouldChange(t *testing.T) {
	h := newHarness(t, calls("", tc("d1", "draft", `{"path":"a.md","content":"hello"}`), tc("d2", "draft", `{"path":"","content":"x"}`)), results.AssistantText("ok"))
	var parked State
	h.env.RegisterDelayedCallback(func() { parked = h.state(t) }, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "d1", Decision: results.DecisionApprove}, nil)
	h.respond(2*time.Minute, Response{CallID: "d2", Decision: results.DecisionDeny, Reason: "no path"}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"draft"}})

	require.Len(t, parked.Cards, 2)
	require.Equal(t, results.StatePendingApproval, parked.Cards[0].State)
	require.Equal(t, []results.FileDiff{{Path: "a.md", Diff: "+hello"}}, parked.Cards[0].Preview)
	require.Empty(t, parked.Cards[1].Preview)
	require.Contains(t, parked.Cards[1].PreviewNote, "draft needs a path", "a call that would fail says so with the tool's own sentence")
	require.Equal(t, results.StateSucceeded, res.Cards[0].State)
	require.Equal(t, []results.FileDiff{{Path: "a.md", Diff: "+hello"}}, res.Cards[0].Preview)
	require.Equal(t, []string{"draft:a.md"}, h.log.all())
}

// Tools that cannot preview cost nothing: no preview activity runs.
func TestNoPreviewForToolsThatCannot(t *testing.T) {
	h := newHarness(t, calls("", tc("w1", "write", `{"path":"a.md","content":"b"}`)), results.AssistantText("ok"))
	var parked State
	h.env.RegisterDelayedCallback(func() { parked = h.state(t) }, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove}, nil)
	h.run(t, Input{Prompt: "p", Tools: []string{"write"}})
	require.Nil(t, parked.Cards[0].Preview)
	require.Empty(t, parked.Cards[0].PreviewNote)
}
