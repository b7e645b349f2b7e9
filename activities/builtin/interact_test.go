package builtin

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

func TestAskUser(t *testing.T) {
	ask := testTools(t, Options{})[AskUser]

	t.Run("choice", func(t *testing.T) {
		out := run(t, ask, tool.Call{}, askUserArgs{Prompt: "Which colour?", Options: []string{"red", "blue"}})
		require.Equal(t, results.NeedChoice("Which colour?", results.Option{ID: "red", Label: "red"}, results.Option{ID: "blue", Label: "blue"}), out)
	})
	t.Run("question", func(t *testing.T) {
		out := run(t, ask, tool.Call{}, askUserArgs{Prompt: "What is your name?"})
		require.Equal(t, results.NeedAnswer("What is your name?", nil), out)
	})

	resumed := []struct {
		name     string
		resume   tool.Resume
		wantText string
		wantErr  string
	}{
		{name: "string answer", resume: tool.Resume{Decision: results.DecisionAnswer, Answer: json.RawMessage(`"blue"`)}, wantText: "blue"},
		{name: "json answer", resume: tool.Resume{Decision: results.DecisionAnswer, Answer: json.RawMessage(`{"n": 3}`)}, wantText: `{"n": 3}`},
		{name: "empty answer", resume: tool.Resume{Decision: results.DecisionAnswer}, wantErr: "empty answer"},
		{name: "declined", resume: tool.Resume{Decision: results.DecisionDeny}, wantErr: "did not answer (deny)"},
		{name: "wrong decision", resume: tool.Resume{Decision: results.DecisionApprove}, wantErr: `"approve"`},
	}
	for _, tt := range resumed {
		t.Run(tt.name, func(t *testing.T) {
			out := run(t, ask, tool.Call{Resume: &tt.resume}, askUserArgs{Prompt: "Which colour?", Options: []string{"red", "blue"}})
			if tt.wantErr != "" {
				requireToolError(t, out, tt.wantErr)
				return
			}
			require.Equal(t, results.SucceedText(tt.wantText), out)
		})
	}

	t.Run("bad arguments", func(t *testing.T) {
		requireToolError(t, run(t, ask, tool.Call{}, askUserArgs{Prompt: " "}), "prompt is empty")
		requireToolError(t, run(t, ask, tool.Call{}, askUserArgs{Prompt: "?", Options: []string{"a", "a"}}), `"a" is listed twice`)
		requireToolError(t, run(t, ask, tool.Call{}, askUserArgs{Prompt: "?", Options: []string{"a", ""}}), "empty option")
	})
}

func TestHandoff(t *testing.T) {
	h := testTools(t, Options{})[Handoff]
	out := run(t, h, tool.Call{}, handoffArgs{Target: "billing", Message: "customer wants a refund"})
	require.Equal(t, results.TransferTo("billing", "customer wants a refund"), out)
	requireToolError(t, run(t, h, tool.Call{}, handoffArgs{Target: ""}), "target is empty")
}
