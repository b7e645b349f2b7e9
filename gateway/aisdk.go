package gateway

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
)

// aisdkWriter speaks the Vercel AI SDK's UI message stream protocol (v1):
// SSE events whose data is one JSON chunk each ("start", "text-delta",
// "tool-input-start", ...), ending with "finish" and [DONE]. A turn is one
// assistant message; each model call is a step, its text one text part
// named by the call. What the protocol has no chunk for (a retried call,
// a card waiting for a person, a status) travels as data-tollgate-* parts,
// which useChat keeps in the message's parts.
type aisdkWriter struct {
	message string
	// call and text are the model call whose step is open and its open
	// text part, if any.
	call, text string
	attempt    map[string]int
	// ids maps a call's piece index (call#index) to its tool call's id;
	// inputs are the tool calls whose input was announced, by model id.
	ids    map[string]string
	inputs map[string]bool
}

func (a *aisdkWriter) start() string {
	a.attempt, a.ids, a.inputs = map[string]int{}, map[string]string{}, map[string]bool{}
	return chunk(0, map[string]any{"type": "start", "messageId": a.message})
}

func chunk(id uint64, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	if id == 0 {
		return fmt.Sprintf("data: %s\n\n", b)
	}
	return fmt.Sprintf("id: %d\ndata: %s\n\n", id, b)
}

// step opens the step of model call call, closing the one before.
func (a *aisdkWriter) step(call string) string {
	if call == a.call {
		return ""
	}
	out := a.closeStep()
	a.call = call
	return out + chunk(0, map[string]any{"type": "start-step"})
}

func (a *aisdkWriter) closeText() string {
	if a.text == "" {
		return ""
	}
	out := chunk(0, map[string]any{"type": "text-end", "id": a.text})
	a.text = ""
	return out
}

func (a *aisdkWriter) closeStep() string {
	if a.call == "" {
		return ""
	}
	out := a.closeText() + chunk(0, map[string]any{"type": "finish-step"})
	a.call = ""
	return out
}

func (a *aisdkWriter) textID(call string) string {
	if n := a.attempt[call]; n > 0 {
		return fmt.Sprintf("%s-%d", call, n)
	}
	return call
}

func (a *aisdkWriter) appendEvent(dst []byte, ev stream.Event) []byte {
	return append(dst, a.event(ev)...)
}

func (a *aisdkWriter) event(ev stream.Event) string {
	var b strings.Builder
	switch ev.Type {
	case stream.TypeText:
		b.WriteString(a.step(ev.Call))
		if a.text == "" {
			a.text = a.textID(ev.Call)
			b.WriteString(chunk(0, map[string]any{"type": "text-start", "id": a.text}))
		}
		b.WriteString(chunk(ev.ID, map[string]any{"type": "text-delta", "id": a.text, "delta": ev.Text}))
	case stream.TypeToolCall:
		b.WriteString(a.step(ev.Call))
		b.WriteString(a.closeText())
		if ev.ToolCallID != "" {
			b.WriteString(chunk(ev.ID, map[string]any{"type": "tool-input-start", "toolCallId": ev.ToolCallID, "toolName": ev.ToolName}))
		}
		if ev.Arguments != "" {
			b.WriteString(chunk(ev.ID, map[string]any{"type": "tool-input-delta", "toolCallId": a.lastTool(ev), "inputTextDelta": ev.Arguments}))
		}
	case stream.TypeReset:
		// The call's text so far is void: its retry writes a new part.
		if a.call == ev.Call {
			b.WriteString(a.closeText())
		}
		a.attempt[ev.Call] = ev.Attempt
		b.WriteString(chunk(ev.ID, map[string]any{"type": "data-tollgate-reset", "data": map[string]any{"call": ev.Call, "attempt": ev.Attempt}}))
	case stream.TypeCard:
		if ev.Card != nil {
			b.WriteString(a.card(ev.ID, *ev.Card))
		}
	case stream.TypeToolProgress:
		b.WriteString(chunk(ev.ID, map[string]any{"type": "data-tollgate-progress", "data": map[string]any{"toolCallId": ev.ToolCallID, "progress": ev.Progress}}))
	case stream.TypeStatus:
		b.WriteString(chunk(ev.ID, map[string]any{"type": "data-tollgate-status", "data": map[string]any{"turn": ev.Turn, "status": ev.Status}}))
	case stream.TypeResult:
		b.WriteString(a.closeStep())
		b.WriteString(chunk(ev.ID, map[string]any{"type": "data-tollgate-result", "data": json.RawMessage(ev.Result)}))
	}
	return b.String()
}

// lastTool is the call a tool_call piece belongs to: the protocol names
// calls by id, the model's later pieces only by index.
func (a *aisdkWriter) lastTool(ev stream.Event) string {
	key := fmt.Sprintf("%s#%d", ev.Call, ev.Index)
	if ev.ToolCallID != "" {
		a.ids[key] = ev.ToolCallID
	}
	return a.ids[key]
}

// card maps a card change onto the tool part of its call: its input once
// the call is decided on or runs, its output or error when it ends; and
// every change as a data-tollgate-card part (replaced in place, by id),
// so a page can show calls that wait for a person.
func (a *aisdkWriter) card(id uint64, c results.Card) string {
	var b strings.Builder
	callID := c.ModelCallID
	if callID == "" {
		callID = c.CallID
	}
	if !a.inputs[callID] {
		a.inputs[callID] = true
		args := c.Arguments
		if len(args) == 0 || !json.Valid(args) {
			args = json.RawMessage(`{}`)
		}
		b.WriteString(chunk(0, map[string]any{"type": "tool-input-available", "toolCallId": callID, "toolName": c.Tool, "input": args}))
	}
	switch c.State {
	case results.StateSucceeded:
		var output any = map[string]any{}
		if c.Output != nil {
			output = c.Output
		}
		b.WriteString(chunk(0, map[string]any{"type": "tool-output-available", "toolCallId": callID, "output": output}))
	case results.StateFailed:
		msg := "the call failed"
		if c.Failure != nil && c.Failure.Message != "" {
			msg = c.Failure.Message
		}
		b.WriteString(chunk(0, map[string]any{"type": "tool-output-error", "toolCallId": callID, "errorText": msg}))
	case results.StateRefused:
		b.WriteString(chunk(0, map[string]any{"type": "tool-output-error", "toolCallId": callID, "errorText": "refused: " + c.Reason}))
	}
	b.WriteString(chunk(id, map[string]any{"type": "data-tollgate-card", "id": c.CallID, "data": c}))
	return b.String()
}

func (a *aisdkWriter) end() string {
	return a.closeStep() + chunk(0, map[string]any{"type": "finish"}) + "data: [DONE]\n\n"
}

func (a *aisdkWriter) lagged(after uint64) string {
	return chunk(0, map[string]any{"type": "error", "errorText": fmt.Sprintf("the watcher fell behind; resume after event %d", after)}) +
		chunk(0, map[string]any{"type": "data-tollgate-lagged", "data": map[string]any{"resume_after": after}})
}
