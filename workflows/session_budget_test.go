package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/transcript"
)

// A session's budget counts every turn's use, survives continue-as-new,
// and stops the turn that reaches it on a budget wait; approving raises
// the session's budget for the turns after it.
func TestSessionBudgetSpansTurnsAndContinueAsNew(t *testing.T) {
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	model := &fakeModel{replies: []results.Message{
		calls("", tc("e1", "echo", `{"text":"1"}`)), results.AssistantText("One."),
		calls("", tc("e2", "echo", `{"text":"2"}`)), calls("", tc("e3", "echo", `{"text":"3"}`)), results.AssistantText("Two."),
	}}
	h := newSessionHarnessWith(t, model, store, Features{})
	h.send(time.Minute, "one", nil)
	next := h.continued(SessionInput{Turn: Input{Tools: []string{"echo"}}, TurnsPerRun: 1, Budget: Budget{ToolCalls: 3}})

	require.Equal(t, Budget{ToolCalls: 3}, next.Carried.Budget)
	require.NotNil(t, next.Carried.Spent)
	require.Equal(t, 1, next.Carried.Spent.ToolCalls)
	require.Equal(t, 2, next.Carried.Spent.ModelCalls)
	require.Equal(t, 30, next.Carried.Spent.Tokens)
	require.NotNil(t, next.Carried.StartedAt)
	first := h.turn("chat/turn-1")
	require.Equal(t, &BudgetState{Limit: Budget{ToolCalls: 3}, Spent: first.SessionBudget.Spent}, first.SessionBudget)
	require.Equal(t, 1, first.ToolCalls)

	// The next run: the second turn makes the session's third tool call
	// and waits before its next model call.
	h2 := newSessionHarnessWith(t, model, store, Features{})
	h2.send(time.Minute, "two", nil)
	var waiting State
	var tooLow, raised updateOutcome
	h2.at(2*time.Minute, func() {
		v, err := h2.env.QueryWorkflowByID("chat/turn-2", StateQuery)
		require.NoError(t, err)
		require.NoError(t, v.Get(&waiting))
	})
	h2.respond(3*time.Minute, "chat/turn-2", Response{CallID: "budget_1", Decision: results.DecisionApprove, Arguments: []byte(`{"tool_calls":2}`)}, &tooLow)
	h2.respond(4*time.Minute, "chat/turn-2", Response{CallID: "budget_1", Decision: results.DecisionApprove, Arguments: []byte(`{"tool_calls":5}`)}, &raised)
	var conv Conversation
	h2.at(time.Hour, func() { conv = h2.conversation() })
	h2.end(2*time.Hour, End{}, nil)
	next.TurnsPerRun = 5
	res := h2.run(next)

	require.Equal(t, StatusWaiting, waiting.Status)
	wait := mustCard(t, waiting.Cards, "budget_1")
	require.Contains(t, wait.Interrupt.Prompt, "the session reached its budget: 3 of 3 tool calls")
	require.JSONEq(t, `{"tool_calls":3}`, string(wait.Arguments))
	require.Equal(t, 3, waiting.SessionBudget.Spent.ToolCalls)
	require.ErrorContains(t, tooLow.rejected, "the new budget is used up already (3 of 2 tool calls)")
	require.True(t, raised.completed)
	require.NoError(t, raised.err)

	second := h2.turn("chat/turn-2")
	require.Equal(t, StatusCompleted, second.Status)
	require.Equal(t, "Two.", second.Text)
	require.Equal(t, Budget{ToolCalls: 5}, second.SessionBudget.Limit)
	require.Nil(t, second.Budget, "the turn itself has no budget")

	for _, c := range []Conversation{conv, res.Conversation} {
		require.Equal(t, Budget{ToolCalls: 5}, c.Budget.Limit)
		require.Equal(t, 3, c.Spent.ToolCalls)
		require.Equal(t, 5, c.Spent.ModelCalls)
		require.Equal(t, 75, c.Spent.Tokens)
	}
	require.Equal(t, 45, res.Turns[len(res.Turns)-1].Tokens)
}
