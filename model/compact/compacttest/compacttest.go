// Package compacttest holds a conversation with parallel tool calls,
// errors and media, and every way package compact can cut it, so each
// provider's tests can check that its encoding of a compacted
// conversation is one its API accepts.
package compacttest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model/compact"
	"github.com/tollgate-dev/tollgate/results"
)

// Conversation is a turn's conversation: a system message, a prompt,
// steps with one and with parallel tool calls, a tool error, a tool
// result with an image, a user message mid-turn and a final reply.
func Conversation() []results.Message {
	big := strings.Repeat("line of tool output\n", 300)
	img := results.Part{Type: results.PartMedia, MediaType: "image/png", Data: []byte("\x89PNG fake")}
	return []results.Message{
		results.SystemText("Keep answers short."),
		results.UserText("Fix the failing tests"),
		{Role: results.RoleAssistant, Parts: []results.Part{results.TextPart("Looking.")}, ToolCalls: []results.ToolCall{
			{ID: "c1", Name: "read_file", Arguments: `{"path":"a.go"}`},
			{ID: "c2", Name: "read_file", Arguments: `{"path":"b.go"}`},
		}},
		toolResult("c1", "read_file", big, false),
		toolResult("c2", "read_file", big, false),
		{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: "c3", Name: "run_tests", Arguments: `{}`}}},
		toolResult("c3", "run_tests", "exit status 1", true),
		results.UserText("Also look at the screenshot."),
		{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: "c4", Name: "screenshot", Arguments: `{}`}}},
		{Role: results.RoleTool, ToolCallID: "c4", ToolName: "screenshot", Parts: []results.Part{results.TextPart("here"), img}},
		{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{
			{ID: "c5", Name: "write_file", Arguments: `{"path":"a.go","content":"` + strings.Repeat("x", 500) + `"}`},
			{ID: "c6", Name: "run_tests", Arguments: `{}`},
			{ID: "c7", Name: "run_tests", Arguments: `not json`},
		}},
		toolResult("c5", "write_file", "ok", false),
		toolResult("c6", "run_tests", big, false),
		toolResult("c7", "run_tests", "arguments are not JSON", true),
		results.AssistantText("Fixed: the tests pass."),
		results.UserText("Now update the changelog."),
		{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: "c8", Name: "write_file", Arguments: `{"path":"CHANGELOG.md"}`}}},
		toolResult("c8", "write_file", "ok", false),
	}
}

func toolResult(id, name, text string, isErr bool) results.Message {
	return results.Message{Role: results.RoleTool, ToolCallID: id, ToolName: name, IsError: isErr, Parts: []results.Part{results.TextPart(text)}}
}

// Case is one compacted conversation.
type Case struct {
	Name     string
	Messages []results.Message
}

// Cases are Conversation compacted every way: summarised and with the
// oldest dropped, keeping from nothing but the last exchange to all.
func Cases() []Case {
	conv := Conversation()
	var out []Case
	seen := map[int]bool{}
	for keep := 0; keep <= compact.Estimate(conv)+100; keep += 50 {
		system, older, recent := compact.Split(conv, keep)
		if len(older) == 0 || seen[len(recent)] {
			continue
		}
		seen[len(recent)] = true
		out = append(out,
			Case{Name: fmt.Sprintf("summarize keep %d", len(recent)), Messages: compact.Summarized(system, "The user wants the tests fixed.", recent)},
		)
		if dropped, n, _ := compact.Drop(conv, keep); n > 0 {
			out = append(out, Case{Name: fmt.Sprintf("drop_oldest keep %d", len(recent)), Messages: dropped})
		}
	}
	return out
}

// Turn is one message of a provider's encoding, reduced to what pairing
// needs: who sends it ("user", "assistant", "tool" or "system"), the
// tool call ids it makes and the call ids it answers.
type Turn struct {
	Role    string
	Calls   []string
	Answers []string
}

// Rules are what a provider's API demands of the encoded conversation.
type Rules struct {
	// Alternate: user and assistant turns alternate, the first one a
	// user's, tool results travel in the user turn after the calls
	// (Anthropic, Bedrock, Gemini).
	Alternate bool
}

// Check reports the first way turns break the pairing of tool calls with
// their results: every call answered before the next assistant turn,
// every answer naming a call of the assistant turn just before it.
func Check(turns []Turn, r Rules) error {
	var open map[string]bool
	last := ""
	first := true
	for i, t := range turns {
		if t.Role == "system" {
			continue
		}
		if r.Alternate {
			if first && t.Role != "user" {
				return fmt.Errorf("turn %d: the conversation opens with %s, not user", i, t.Role)
			}
			if t.Role == last {
				return fmt.Errorf("turn %d: two %s turns in a row", i, t.Role)
			}
		}
		first = false
		for _, id := range t.Answers {
			if !open[id] {
				return fmt.Errorf("turn %d answers call %q, which the assistant turn before it did not make (or was answered)", i, id)
			}
			delete(open, id)
		}
		if t.Role == "assistant" {
			if len(open) > 0 {
				return fmt.Errorf("turn %d: an assistant turn follows calls not answered: %v", i, open)
			}
			open = map[string]bool{}
			for _, id := range t.Calls {
				open[id] = true
			}
		}
		last = t.Role
	}
	if len(open) > 0 {
		return fmt.Errorf("calls not answered at the end: %v", open)
	}
	return nil
}

// Broken is a conversation no provider accepts: a tool result whose call
// was compacted away. Provider tests check that Check catches it in their
// encoding, so a check that passes means something.
func Broken() []results.Message {
	conv := Conversation()
	// Drop the assistant message of c1 and c2, keep their results.
	return append([]results.Message{conv[0], conv[1]}, conv[3:]...)
}

// Run is a provider's pairing test: encode is the provider's encoding of
// a conversation, read back as turns. Every cut that Cases makes must
// pass Check under r, and Broken must fail it, so the check is known to
// look.
func Run(t *testing.T, r Rules, encode func(*testing.T, []results.Message) []Turn) {
	t.Helper()
	require.Error(t, Check(encode(t, Broken()), r), "the check catches a result without its call")
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			require.NoError(t, Check(encode(t, c.Messages), r))
		})
	}
}

// Wire is v's JSON encoding read back as a generic object, for reading a
// provider's wire format without its SDK's types.
func Wire(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// Str, List and Obj read a Wire tree; a missing or other value is empty.
func Str(v any) string {
	s, _ := v.(string)
	return s
}

func List(v any) []any {
	l, _ := v.([]any)
	return l
}

func Obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
