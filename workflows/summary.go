package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/results"
)

// What the Temporal UI shows of a turn: a summary from the prompt, the
// calls waiting for a person as current details, and a summary on each
// activity, so an operator reads "write_file summary.md: pending approval"
// instead of a bare RUNNING row.

// uiVersion of the turn's change marker adds the activity summaries
// (they travel in the commands that schedule activities). One marker
// carries every change of a release: each marker costs a command and a
// search attribute upsert at the start of every turn.
const uiVersion = hardeningVersion + 1

// waitsChanged tells the UI and the search attributes that a call started
// or stopped waiting.
func (t *turn) waitsChanged(ctx workflow.Context) {
	t.showWaiting(ctx)
	t.publish(ctx)
	t.tellCaller(ctx)
}

// maxSummaryRunes keeps a one-line summary one line in the UI.
const maxSummaryRunes = 80

// StartSummary is the static summary and details a client gives a new
// turn: the prompt's first line, and the model and tools.
func StartSummary(in Input) (summary, details string) {
	first, _, _ := strings.Cut(strings.TrimSpace(in.Prompt), "\n")
	if first == "" {
		first = fmt.Sprintf("continues a conversation of %d messages", len(in.Messages))
	}
	details = fmt.Sprintf("model `%s`", in.Model)
	if len(in.Tools) > 0 {
		details += ", tools " + strings.Join(in.Tools, ", ")
	}
	if in.User != "" {
		details += ", for " + in.User
	}
	return clip(first), details
}

// callSummary is a call's tool and the argument that says most about it:
// "write_file summary.md", "http_fetch https://…".
func callSummary(tool string, args json.RawMessage) string {
	if a := argSummary(args); a != "" {
		return clip(tool + " " + a)
	}
	return tool
}

// argSummary picks the argument a person recognises a call by: a path,
// URL or command when there is one, else the first string argument by
// name.
func argSummary(args json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(args, &fields) != nil {
		return ""
	}
	keys := make([]string, 0, len(fields))
	//workflowcheck:ignore keys are sorted before use
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, preferred := range []string{"path", "url", "command", "query", "name", "target", "prompt"} {
		if i := slices.Index(keys, preferred); i >= 0 {
			keys[0], keys[i] = keys[i], keys[0]
			break
		}
	}
	for _, k := range keys {
		var s string
		if json.Unmarshal(fields[k], &s) == nil && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// clip makes s one line of at most maxSummaryRunes.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxSummaryRunes {
		return string(r[:maxSummaryRunes-1]) + "…"
	}
	return s
}

// showWaiting sets the turn's current details to the calls that wait for
// a person. Current details are served by a query, not recorded, so this
// needs no version.
func (t *turn) showWaiting(ctx workflow.Context) {
	var b strings.Builder
	for _, c := range t.calls {
		if !c.card.State.Waiting() {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("**Waiting for a person**\n")
		}
		b.WriteString(fmt.Sprintf("- `%s` %s: %s\n", c.card.CallID, callSummary(c.card.Tool, c.card.EffectiveArguments()), waitText(c.card)))
	}
	if line := t.usageLine(); line != "" {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(line)
	}
	workflow.SetCurrentDetails(ctx, b.String())
}

// usageLine is what the turn has used so far, for its current details:
// "**Used** 12,400 tokens, $0.0310, 3 model calls, 1 compaction".
func (t *turn) usageLine() string {
	if !t.compacting() || t.step == 0 {
		return ""
	}
	line := fmt.Sprintf("**Used** %s tokens", thousands(t.usage.InputTokens+t.usage.OutputTokens))
	if t.unpriced == 0 || t.cost > 0 {
		line += fmt.Sprintf(", $%.4f", t.cost)
	}
	if t.unpriced > 0 {
		line += fmt.Sprintf(" (%d calls of unknown cost)", t.unpriced)
	}
	if t.step == 1 {
		line += ", 1 model call"
	} else {
		line += fmt.Sprintf(", %d model calls", t.step)
	}
	switch t.compactions {
	case 0:
	case 1:
		line += ", 1 compaction"
	default:
		line += fmt.Sprintf(", %d compactions", t.compactions)
	}
	return line + "\n"
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func waitText(c results.Card) string {
	switch c.State {
	case results.StatePendingApproval:
		return "pending approval"
	case results.StateWaitingAnswer:
		return "waiting for an answer: " + clip(c.Interrupt.Prompt)
	case results.StateWaitingConnection:
		return "waiting for a " + c.Connection.Provider + " connection"
	}
	return string(c.State)
}
