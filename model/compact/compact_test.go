package compact_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model/compact"
	"github.com/tollgate-dev/tollgate/model/compact/compacttest"
	"github.com/tollgate-dev/tollgate/results"
)

// paired checks what every provider requires of a conversation: each
// tool message answers a call of the assistant message before its run of
// tool messages, and every call is answered there.
func paired(t *testing.T, msgs []results.Message) {
	t.Helper()
	for i, m := range msgs {
		if len(m.ToolCalls) > 0 {
			answered := map[string]bool{}
			for j := i + 1; j < len(msgs) && msgs[j].Role == results.RoleTool; j++ {
				answered[msgs[j].ToolCallID] = true
			}
			for _, c := range m.ToolCalls {
				require.True(t, answered[c.ID], "call %s at %d is not answered right after it", c.ID, i)
			}
		}
		if m.Role == results.RoleTool {
			j := i - 1
			for j >= 0 && msgs[j].Role == results.RoleTool {
				j--
			}
			require.GreaterOrEqual(t, j, 0, "tool message %d opens the conversation", i)
			found := false
			for _, c := range msgs[j].ToolCalls {
				found = found || c.ID == m.ToolCallID
			}
			require.True(t, found, "tool message %s at %d follows no call of that id", m.ToolCallID, i)
		}
	}
}

func TestSplitKeepsEveryToolCallWithItsResults(t *testing.T) {
	cases := compacttest.Cases()
	require.GreaterOrEqual(t, len(cases), 8, "the fixture cuts the conversation in several places")
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			paired(t, c.Messages)
			require.Equal(t, results.RoleSystem, c.Messages[0].Role, "system messages stay at the front")
			require.Equal(t, results.RoleUser, c.Messages[1].Role, "the conversation opens with a user message")
		})
	}
}

func TestSplitKeepsTheLastExchangeAndRespectsTheBudget(t *testing.T) {
	conv := compacttest.Conversation()
	system, older, recent := compact.Split(conv, 0)
	require.Len(t, system, 1)
	// The last exchange: the assistant's call and its result.
	require.Len(t, recent, 2)
	require.Equal(t, "c8", recent[0].ToolCalls[0].ID)
	require.Len(t, older, len(conv)-3)

	_, older, recent = compact.Split(conv, compact.Estimate(conv[2:]))
	require.Len(t, older, 1, "all but the first unit fits; the first is compacted")
	require.Len(t, recent, len(conv)-2)
}

func TestSplitKeepsUnansweredCalls(t *testing.T) {
	conv := compacttest.Conversation()
	// A step whose calls are not all answered yet, followed by a user
	// message: the step stays verbatim, with everything after it.
	conv = append(conv,
		results.Message{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: "c9", Name: "ask"}, {ID: "c10", Name: "ask"}}},
		results.Message{Role: results.RoleTool, ToolCallID: "c9", Parts: []results.Part{results.TextPart("yes")}},
		results.UserText("still there?"),
	)
	_, _, recent := compact.Split(conv, 0)
	require.Len(t, recent, 3)
	require.Equal(t, "c9", recent[0].ToolCalls[0].ID)
}

func TestSplitHasNothingToCompactInOneExchange(t *testing.T) {
	conv := []results.Message{results.SystemText("s"), results.UserText(strings.Repeat("long ", 10000))}
	_, older, recent := compact.Split(conv, 0)
	require.Empty(t, older)
	require.Len(t, recent, 1)
}

func TestSummaryRequestIsPlainTextAndBounded(t *testing.T) {
	conv := compacttest.Conversation()
	msgs := compact.SummaryRequest(conv, 1000)
	require.Len(t, msgs, 1)
	require.Equal(t, results.RoleUser, msgs[0].Role)
	require.Empty(t, msgs[0].ToolCalls)
	text := msgs[0].Text()
	require.LessOrEqual(t, len(text), 1100)
	require.Contains(t, text, "part of the conversation is cut")
	require.Contains(t, text, "Fix the failing tests", "the start is kept")
	require.Contains(t, text, "CHANGELOG.md", "the most recent part is kept")

	// Clipping tool texts harder is tried before cutting.
	clipped := compact.SummaryRequest(conv, 8000)[0].Text()
	require.NotContains(t, clipped, "part of the conversation is cut")
	require.LessOrEqual(t, len(clipped), 8100)

	whole := compact.SummaryRequest(conv, 0)[0].Text()
	require.Contains(t, whole, "Fix the failing tests")
	require.Contains(t, whole, "[tool run_tests c3 error]")
	require.True(t, strings.Contains(whole, "more bytes]"), "large tool outputs are clipped")
}

func TestWindowDefaults(t *testing.T) {
	require.Equal(t, 200_000, compact.Window("anthropic:claude-sonnet-4-5"))
	require.Equal(t, 200_000, compact.Window("bedrock:us.anthropic.claude-sonnet-4-5-v1:0"))
	require.Equal(t, 1_047_576, compact.Window("openai:gpt-4.1-mini"))
	require.Equal(t, 1_048_576, compact.Window("gemini:gemini-2.5-pro"))
	require.Zero(t, compact.Window("ollama:llama3.2"))
	require.Zero(t, compact.Window("nonsense"))
}

// drop_oldest never drops the task: the first user message stays after
// the system messages, with a note of what was dropped, however often the
// conversation is compacted, and every call stays with its results.
func TestDropKeepsTheTaskAndEveryCallWithItsResults(t *testing.T) {
	conv := compacttest.Conversation()
	out, dropped, kept := compact.Drop(conv, 0)
	paired(t, out)
	require.Equal(t, results.RoleSystem, out[0].Role)
	require.Equal(t, "Fix the failing tests", out[1].Text(), "the task stays")
	require.Equal(t, "[14 earlier messages of this conversation were dropped to fit the model's context window.]", out[2].Text())
	require.Equal(t, 14, dropped, "all but the system message, the task and the last exchange")
	require.Equal(t, 2, kept)
	require.Equal(t, "c8", out[3].ToolCalls[0].ID)
	require.Len(t, out, 5)

	// The turn goes on and compacts again: the task is still there, and
	// the note counts every message dropped so far.
	out = append(out,
		results.Message{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: "c9", Name: "run_tests"}}},
		results.Message{Role: results.RoleTool, ToolCallID: "c9", ToolName: "run_tests", Parts: []results.Part{results.TextPart("ok")}},
	)
	again, dropped, _ := compact.Drop(out, 0)
	paired(t, again)
	require.Equal(t, 2, dropped, "c8's exchange")
	require.Equal(t, []string{"Keep answers short.", "Fix the failing tests", "[16 earlier messages of this conversation were dropped to fit the model's context window.]", "", "ok"}, texts(again))

	// With a budget that keeps everything after the task, the oldest
	// exchange goes rather than nothing.
	_, dropped, _ = compact.Drop(conv, compact.Estimate(conv))
	require.Positive(t, dropped)
}

// A conversation of the task and one exchange has nothing drop_oldest
// may drop.
func TestDropHasNothingToDropBesideTheTask(t *testing.T) {
	conv := []results.Message{
		results.SystemText("s"),
		results.UserText("the task"),
		{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: "c1", Name: "read_file"}}},
		{Role: results.RoleTool, ToolCallID: "c1", Parts: []results.Part{results.TextPart(strings.Repeat("x", 10000))}},
	}
	out, dropped, _ := compact.Drop(conv, 0)
	require.Zero(t, dropped)
	require.Nil(t, out)
}

// A result that does not follow its call directly (a user message came
// between a step's results) still ties the call's unit to it: no cut
// falls between them.
func TestSplitNeverSeparatesACallFromALaterResult(t *testing.T) {
	conv := []results.Message{
		results.SystemText("s"),
		results.UserText("the task"),
		{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: "c1", Name: "a"}, {ID: "c2", Name: "b"}}},
		{Role: results.RoleTool, ToolCallID: "c1", Parts: []results.Part{results.TextPart("one")}},
		results.UserText("an aside"),
		{Role: results.RoleTool, ToolCallID: "c2", Parts: []results.Part{results.TextPart("two")}},
		results.AssistantText("done"),
		results.UserText("next"),
		{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: "c3", Name: "a"}}},
		{Role: results.RoleTool, ToolCallID: "c3", Parts: []results.Part{results.TextPart("three")}},
	}
	for keep := 0; keep <= compact.Estimate(conv); keep++ {
		_, older, recent := compact.Split(conv, keep)
		if len(older) == 0 {
			continue
		}
		require.NotEqual(t, "an aside", recent[0].Text(), "keep %d cuts between c2 and its result", keep)
		require.NotEqual(t, results.RoleTool, recent[0].Role, "keep %d opens recent with a result", keep)
	}
}

func texts(msgs []results.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Text())
	}
	return out
}
