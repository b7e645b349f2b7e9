package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/results"
)

// started counts the activities the turn starts, local ones too, by
// type.
func (h *harness) started() map[string]int {
	n := map[string]int{}
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		n[info.ActivityType.Name]++
	})
	h.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		n[info.ActivityType.Name]++
	})
	return n
}

func (h *harness) chunks(t *testing.T) int {
	t.Helper()
	n, _, err := h.store.Stats()
	require.NoError(t, err)
	return n
}

func echoSteps(n int, text string) []results.Message {
	var replies []results.Message
	for i := range n {
		replies = append(replies, calls("step", tc("e"+string(rune('a'+i)), "echo", `{"text":"`+text+`"}`)))
	}
	return append(replies, results.AssistantText("Done."))
}

// A short conversation travels inline: the model calls that ask for tools
// store nothing, the final one stores it all in one chunk, and the model
// still sees every message.
func TestShortTurnStoresItsConversationOnce(t *testing.T) {
	h := newHarness(t, echoSteps(4, "hi")...)
	n := h.started()
	res := h.run(t, Input{Prompt: "go", Tools: []string{"echo"}})

	require.Equal(t, StatusCompleted, res.Status)
	require.Equal(t, 5, n[activities.CallModelName])
	require.Zero(t, n[activities.StoreTranscriptName], "a finished turn's last call stored the tail")
	require.Equal(t, 1, h.chunks(t))
	require.Len(t, h.model.last(), 9, "the prompt, four replies and four results")
	conv, err := h.store.Load(res.Head)
	require.NoError(t, err)
	require.Equal(t, res.Messages, conv)
}

// A turn that ends after a reply whose messages were left inline stores
// them before it returns: the head covers the conversation through the
// last reply, and only the tool results after it are unstored, as a
// session expects.
func TestTurnEndedAfterAnInlineReplyStoresIt(t *testing.T) {
	h := newHarness(t, echoSteps(3, "hi")...)
	n := h.started()
	in := Input{Prompt: "go", Tools: []string{"echo"}, MaxSteps: 2}
	res := h.run(t, in)

	require.Equal(t, StatusMaxSteps, res.Status)
	require.Equal(t, 1, n[activities.StoreTranscriptName])
	require.Equal(t, 1, h.chunks(t))
	conv, err := h.store.Load(res.Head)
	require.NoError(t, err)
	require.Equal(t, res.Messages[:len(res.Messages)-1], conv)
	head, unstored := continuation(in, res)
	require.Equal(t, res.Head, head)
	require.Equal(t, []string{"tool: tool:eb"}, texts(unstored))
}

// Messages worth a chunk are stored by the call that read them.
func TestLongMessagesAreStoredByEveryCall(t *testing.T) {
	h := newHarness(t, echoSteps(3, strings.Repeat("x", activities.InlineTailBytes))...)
	n := h.started()
	res := h.run(t, Input{Prompt: "go", Tools: []string{"echo"}})

	require.Equal(t, StatusCompleted, res.Status)
	require.Zero(t, n[activities.StoreTranscriptName])
	require.Equal(t, 4, h.chunks(t), "one chunk per model call")
}

// A turn that continues a stored conversation could not send it whole if
// storing a tail failed, so its calls store every time.
func TestTurnContinuingAStoredConversationStoresEveryCall(t *testing.T) {
	h := newHarness(t, echoSteps(2, "hi")...)
	head, err := h.store.Append("", []results.Message{results.UserText("earlier"), results.AssistantText("Noted.")})
	require.NoError(t, err)
	n := h.started()
	res := h.run(t, Input{Prompt: "go", Head: head, Tools: []string{"echo"}})

	require.Equal(t, StatusCompleted, res.Status)
	// The fake model counts the stored reply: it plays from its second.
	require.Equal(t, 2, n[activities.CallModelName])
	require.Equal(t, 1+2, h.chunks(t), "the stored conversation and one chunk per model call")
	conv, err := h.store.Load(res.Head)
	require.NoError(t, err)
	require.Len(t, conv, 2+4)
}

// If the tail cannot be stored, the turn loses nothing: it carries its
// conversation whole, as after a model call that could not store it.
func TestTailThatCannotBeStoredTravelsWhole(t *testing.T) {
	h := newHarness(t, echoSteps(3, "hi")...)
	h.env.OnActivity(activities.StoreTranscriptName, mock.Anything, mock.Anything).
		Return(activities.StoreTranscriptResult{}, errors.New("disk full"))
	in := Input{Prompt: "go", Tools: []string{"echo"}, MaxSteps: 2}
	res := h.run(t, in)

	require.Equal(t, StatusMaxSteps, res.Status)
	require.Empty(t, res.Head)
	_, unstored := continuation(in, res)
	require.Equal(t, []string{"user: go", "assistant: step call:ea", "tool: tool:ea", "assistant: step call:eb", "tool: tool:eb"}, texts(unstored))
}

// The last call's token count already holds the tail it read inline, so
// only the messages after its reply count towards the next call.
func TestNearWindowCountsAnInlineTailOnce(t *testing.T) {
	tail := []results.Message{results.UserText(strings.Repeat("x", 800)), calls("", tc("e1", "echo", `{}`))}
	tr := &turn{v: inlineTailVersion, in: Input{Policy: Policy{ContextTokens: 1000}}, contextTokens: 700}
	tr.conv, tr.replyAt = tail, len(tail)
	require.False(t, tr.nearWindow(), "700 tokens of 1000: the tail is among them")

	tr.conv = append(tr.conv, results.Message{Role: results.RoleTool, ToolCallID: "e1", Parts: []results.Part{results.TextPart(strings.Repeat("y", 800))}})
	require.True(t, tr.nearWindow(), "a 200-token tool result after the reply passes 80%")
}
