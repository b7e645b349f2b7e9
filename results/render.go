package results

import (
	"fmt"
	"strings"
)

// InternalErrorText is what the model is told about an internal error. It
// names the reference so an operator can find the detail, and nothing else.
func InternalErrorText(ref string) string {
	return fmt.Sprintf("The tool failed because of an internal error (reference %s). An operator has the details; try something else or tell the user.", ref)
}

// MaxPersonText bounds what a person wrote (a refusal's reason, edited
// arguments) as the model sees it; the card keeps it whole.
const MaxPersonText = 2 << 10

// RefusedText is what the model is told about a refused call.
func RefusedText(reason string) string {
	reason, _ = Truncate(reason, Limits{MaxBytes: MaxPersonText})
	return fmt.Sprintf("This call was refused and did not run: %s. Do not retry the same call.", reason)
}

// SilentSuccessText stands in for a success with no output, since several
// providers reject an empty tool result.
const SilentSuccessText = "The tool succeeded with no output."

// Render turns a final card into the one tool message the model sees for
// it, answering the model's own call id. It returns an error for a card that is not final: every call gets
// exactly one message, and only once it has one outcome.
func Render(c Card) (Message, error) {
	if err := c.Validate(); err != nil {
		return Message{}, err
	}
	m := Message{Role: RoleTool, ToolCallID: c.CallID, ToolName: c.Tool}
	if c.ModelCallID != "" {
		m.ToolCallID = c.ModelCallID
	}
	switch c.State {
	case StateSucceeded:
		m.Parts = renderSuccess(c)
	case StateFailed:
		m.IsError = true
		m.Parts = []Part{TextPart(errorJSON(c.Failure.modelMessage()))}
	case StateRefused:
		m.IsError = true
		m.Parts = []Part{TextPart(errorJSON(RefusedText(c.Reason)))}
	default:
		return Message{}, fmt.Errorf("card %s is %s, not final: it has no tool message yet", c.CallID, c.State)
	}
	// A refused call did not run, so telling the model it "ran with" the
	// edited arguments would be false.
	if len(c.EditedArguments) > 0 && c.State != StateRefused {
		edited, _ := Truncate(string(CompactJSON(c.EditedArguments)), Limits{MaxBytes: MaxPersonText})
		note := fmt.Sprintf("Note: a person edited the arguments before approving; the tool ran with %s instead of what you sent.", edited)
		m.Parts = append([]Part{TextPart(note)}, m.Parts...)
	}
	return m, nil
}

func renderSuccess(c Card) []Part {
	if c.Transfer != nil {
		text := fmt.Sprintf("Transferred the conversation to %s.", c.Transfer.Target)
		return []Part{TextPart(text)}
	}
	s := c.Output
	if s == nil {
		return []Part{TextPart(SilentSuccessText)}
	}
	var parts []Part
	var text []string
	flush := func() {
		if len(text) > 0 {
			parts = append(parts, TextPart(strings.Join(text, "\n")))
			text = nil
		}
	}
	for _, p := range s.Parts {
		switch p.Type {
		case PartText:
			// Empty text would make an empty tool result, which several
			// providers reject; if nothing else is left the call renders
			// as a silent success below.
			if p.Text != "" {
				text = append(text, p.Text)
			}
		case PartJSON:
			text = append(text, string(CompactJSON(p.JSON)))
		case PartMedia:
			flush()
			parts = append(parts, p)
		}
	}
	if len(s.Sources) > 0 {
		var b strings.Builder
		b.WriteString("Sources:")
		for i, src := range s.Sources {
			if src.Title != "" {
				b.WriteString(fmt.Sprintf("\n[%d] %s <%s>", i+1, src.Title, src.URL))
			} else {
				b.WriteString(fmt.Sprintf("\n[%d] <%s>", i+1, src.URL))
			}
		}
		text = append(text, b.String())
	}
	flush()
	if len(parts) == 0 {
		return []Part{TextPart(SilentSuccessText)}
	}
	return parts
}
