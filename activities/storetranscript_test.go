package activities

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

// toolReply asks for one tool with arguments of n bytes.
func toolReply(n int) func(model.Request) (model.Response, error) {
	return func(model.Request) (model.Response, error) {
		args := `{"text":"` + strings.Repeat("x", n) + `"}`
		return model.Response{Message: results.Message{ToolCalls: []results.ToolCall{{ID: "c1", Name: "echo", Arguments: args}}}}, nil
	}
}

// A call offered InlineTail leaves a small tail that asks for tools
// unstored, head and whole-conversation head unchanged; a tail of the
// limit or more, a final reply and a call not offered it are stored.
func TestCallModelLeavesShortTailsInline(t *testing.T) {
	for _, c := range []struct {
		name   string
		reply  func(model.Request) (model.Response, error)
		inline int
		stored bool
	}{
		{"short tail", toolReply(10), InlineTailBytes, false},
		{"tail at the limit", toolReply(InlineTailBytes), InlineTailBytes, true},
		{"final reply", countingReply, InlineTailBytes, true},
		{"not offered", toolReply(10), 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			acts := newModelActivities(t, &fakeProvider{reply: c.reply})
			head, err := acts.Transcripts.Append("", []results.Message{results.UserText("earlier")})
			require.NoError(t, err)
			in := CallModelInput{Model: "fake:m", Transcript: head, Full: head, Messages: []results.Message{results.UserText("go")}, InlineTail: c.inline}
			res, err := callModel(t, acts, in)
			require.NoError(t, err)
			chunks, _, err := acts.Transcripts.Stats()
			require.NoError(t, err)
			if !c.stored {
				require.True(t, res.Deferred)
				require.Equal(t, head, res.Transcript)
				require.Equal(t, head, res.Full)
				require.Equal(t, 1, chunks, "nothing stored")
				return
			}
			require.False(t, res.Deferred)
			require.NotEqual(t, head, res.Transcript)
			want := []string{"user: earlier", "user: go", "assistant: " + res.Response.Message.Text()}
			for _, h := range []string{res.Transcript, res.Full} {
				conv, err := acts.Transcripts.Load(h)
				require.NoError(t, err)
				require.Equal(t, want, texts(conv))
			}
		})
	}
}

// StoreTranscript stores the tail after the head and after the whole
// conversation's head.
func TestStoreTranscriptStoresAfterBothHeads(t *testing.T) {
	acts := newModelActivities(t, &fakeProvider{reply: countingReply})
	compacted, err := acts.Transcripts.Append("", []results.Message{results.UserText("summary")})
	require.NoError(t, err)
	full, err := acts.Transcripts.Append("", []results.Message{results.UserText("one"), results.AssistantText("two")})
	require.NoError(t, err)
	tail := []results.Message{results.UserText("go"), results.AssistantText("going")}

	val, err := newEnv(acts).ExecuteActivity(acts.StoreTranscript, StoreTranscriptInput{TurnID: "t", Transcript: compacted, Full: full, Messages: tail})
	require.NoError(t, err)
	var res StoreTranscriptResult
	require.NoError(t, val.Get(&res))
	conv, err := acts.Transcripts.Load(res.Transcript)
	require.NoError(t, err)
	require.Equal(t, []string{"user: summary", "user: go", "assistant: going"}, texts(conv))
	whole, err := acts.Transcripts.Load(res.Full)
	require.NoError(t, err)
	require.Equal(t, []string{"user: one", "assistant: two", "user: go", "assistant: going"}, texts(whole))
}
