package tollgatetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

type noteArgs struct {
	Text string `json:"text"`
}

func TestTurnRunsYourToolsAndDeliversAnswers(t *testing.T) {
	var notes []string
	note := tool.MustFunc(tool.Spec{Name: "note", Description: "Keep a note.", Approval: tool.ApprovalAlways, Idempotent: true},
		func(_ context.Context, _ tool.Call, a noteArgs) (results.Outcome, error) {
			notes = append(notes, a.Text)
			return results.SucceedText("noted"), nil
		})
	m := tollgatetest.NewModel(
		tollgatetest.Reply("Noting it.", tollgatetest.Call("n1", "note", noteArgs{Text: "buy milk"})),
		tollgatetest.Reply("Done."),
	)
	turn := tollgatetest.NewTurn(t, tollgate.Options{Tools: []tool.Tool{note}, NoBuiltins: true}, m)
	var parked workflows.State
	turn.StateAt(time.Hour, func(s workflows.State) { parked = s })
	turn.RespondAt(2*time.Hour, workflows.Response{CallID: "n1", Decision: results.DecisionApprove, By: "ann"})

	res, err := turn.Run(workflows.Input{Prompt: "remember milk", Tools: []string{"note"}})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusWaiting, parked.Status)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, "Done.", res.Text)
	require.Equal(t, []string{"buy milk"}, notes)
	require.Len(t, m.Requests(), 2)
}

func TestReplayReplaysTheCorpusAndSaysWhatBroke(t *testing.T) {
	got := tollgatetest.Replay(context.Background(), t.TempDir(), "../workflows/testdata/histories", "no-such-file.json")
	require.Greater(t, len(got), 10)
	for _, r := range got[:len(got)-1] {
		require.NoError(t, r.Err, r.File)
		require.Positive(t, r.Events, r.File)
	}
	last := got[len(got)-1]
	require.Equal(t, "no-such-file.json", last.File)
	require.ErrorContains(t, last.Err, "open history")
}

func TestAgentTurnScriptsEachAgentAndRoutesAnswersToTheChild(t *testing.T) {
	var notes []string
	note := tool.MustFunc(tool.Spec{Name: "note", Description: "Keep a note.", Approval: tool.ApprovalAlways, Idempotent: true},
		func(_ context.Context, _ tool.Call, a noteArgs) (results.Outcome, error) {
			notes = append(notes, a.Text)
			return results.SucceedText("noted"), nil
		})
	models := tollgatetest.Models{
		"boss": tollgatetest.NewModel(
			tollgatetest.Reply("", tollgatetest.Call("c1", "agent_scribe", map[string]string{"task": "note the milk"})),
			tollgatetest.Reply("The scribe noted it."),
		),
		"scribe": tollgatetest.NewModel(
			tollgatetest.Reply("", tollgatetest.Call("n1", "note", noteArgs{Text: "buy milk"})),
			tollgatetest.Reply("Noted: buy milk."),
		),
	}
	turn := tollgatetest.NewAgentTurn(t, tollgate.Options{Tools: []tool.Tool{note}, NoBuiltins: true, Agents: []workflows.Agent{
		{Name: "boss", Model: "tollgatetest:boss", Tools: []string{"agent:scribe"}},
		{Name: "scribe", Description: "Keeps notes.", Model: "tollgatetest:scribe", Tools: []string{"note"}},
	}}, models)
	var parked workflows.State
	turn.StateAt(time.Hour, func(s workflows.State) { parked = s })
	turn.RespondAt(2*time.Hour, workflows.Response{CallID: "c1/n1", Decision: results.DecisionApprove, By: "ann"})

	res, err := turn.Run(workflows.Input{Agent: "boss", Prompt: "remember milk"})
	require.NoError(t, err)
	require.Equal(t, workflows.StatusWaiting, parked.Status)
	require.Equal(t, "c1/n1", parked.Cards[0].Agent.Waiting[0].CallID)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, "The scribe noted it.", res.Text)
	require.Equal(t, []string{"buy milk"}, notes)
	require.Len(t, models["scribe"].Requests(), 2)
}
