package builtin

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

type askUserArgs struct {
	Prompt  string   `json:"prompt" jsonschema:"the question to put to the user"`
	Options []string `json:"options,omitempty" jsonschema:"answers to choose from; omit for a free-text answer"`
}

func askUserTool(Options) (tool.Tool, error) {
	return tool.Func(tool.Spec{
		Name:        AskUser,
		Description: "Ask the user a question and wait for the answer. Give options for a multiple-choice question, or none for a free-text answer. The answer may take a long time; nothing else in this step waits for it.",
		Idempotent:  true,
		Concurrent:  true,
	}, func(ctx context.Context, call tool.Call, args askUserArgs) (results.Outcome, error) {
		if call.Resume != nil {
			return answered(call.Resume)
		}
		prompt := strings.TrimSpace(args.Prompt)
		if prompt == "" {
			return results.FailTool("prompt is empty"), nil
		}
		if len(args.Options) == 0 {
			return results.NeedAnswer(prompt, nil), nil
		}
		// The option text is its id, so the answer the person picks is the
		// text the model offered.
		opts := make([]results.Option, 0, len(args.Options))
		seen := map[string]bool{}
		for _, o := range args.Options {
			o = strings.TrimSpace(o)
			switch {
			case o == "":
				return results.FailTool("options contain an empty option"), nil
			case seen[o]:
				return results.FailTool("option %q is listed twice", o), nil
			}
			seen[o] = true
			opts = append(opts, results.Option{ID: o, Label: o})
		}
		return results.NeedChoice(prompt, opts...), nil
	})
}

// answered turns the person's answer into the tool's result. The workflow
// validated it against the choices, so it is passed on as given.
func answered(r *tool.Resume) (results.Outcome, error) {
	switch r.Decision {
	case results.DecisionAnswer:
	case results.DecisionDeny, results.DecisionCancel, results.DecisionTimeout:
		return results.FailTool("the user did not answer (%s)", r.Decision), nil
	default:
		return results.FailTool("ask_user cannot use a %q decision as an answer", r.Decision), nil
	}
	var s string
	if err := json.Unmarshal(r.Answer, &s); err == nil {
		return results.SucceedText(s), nil
	}
	if len(r.Answer) == 0 {
		return results.FailTool("the user gave an empty answer"), nil
	}
	return results.SucceedText(string(r.Answer)), nil
}
