package results

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Role is who a conversation message is from.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolCall is one call the model asked for. Arguments is the model's raw
// text: it may not even be valid JSON, and that is the tool call's problem,
// not the turn's.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one provider-neutral conversation message.
type Message struct {
	Role  Role   `json:"role"`
	Parts []Part `json:"parts,omitempty"`
	// ToolCalls are set on assistant messages.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID, ToolName and IsError are set on tool messages.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
}

// UserText and AssistantText build plain text messages.
func UserText(s string) Message { return Message{Role: RoleUser, Parts: []Part{TextPart(s)}} }

func SystemText(s string) Message { return Message{Role: RoleSystem, Parts: []Part{TextPart(s)}} }

func AssistantText(s string) Message {
	return Message{Role: RoleAssistant, Parts: []Part{TextPart(s)}}
}

// Text joins the message's text and JSON parts in order. Media parts
// become placeholders such as "[image/png]".
func (m Message) Text() string {
	var b strings.Builder
	for _, p := range m.Parts {
		var s string
		switch p.Type {
		case PartText:
			s = p.Text
		case PartJSON:
			s = string(p.JSON)
		case PartMedia:
			s = mediaPlaceholder(p.MediaType)
		}
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(s)
	}
	return b.String()
}

// media returns the message's media parts in order.
func (m Message) media() []Part {
	var out []Part
	for _, p := range m.Parts {
		if p.Type == PartMedia {
			out = append(out, p)
		}
	}
	return out
}

// SplitMedia is for providers that cannot take media inside a tool result:
// it returns the tool messages with media replaced by placeholders, and one
// user message carrying that media (nil when there is none) to send right
// after them. Each media part is preceded by a line naming its call.
func SplitMedia(toolMessages []Message) ([]Message, *Message) {
	out := make([]Message, len(toolMessages))
	var media []Part
	for i, m := range toolMessages {
		parts := m.media()
		if len(parts) == 0 {
			out[i] = m
			continue
		}
		stripped := m
		stripped.Parts = []Part{TextPart(m.Text())}
		out[i] = stripped
		media = append(media, TextPart(fmt.Sprintf("Media returned by tool call %s (%s):", m.ToolCallID, m.ToolName)))
		media = append(media, parts...)
	}
	if len(media) == 0 {
		return out, nil
	}
	return out, &Message{Role: RoleUser, Parts: media}
}

func mediaPlaceholder(mediaType string) string {
	if mediaType == "" {
		mediaType = "media"
	}
	return "[" + mediaType + "]"
}

// errorJSON is the body of every error-marked tool message.
func errorJSON(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}
