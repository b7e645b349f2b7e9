package results_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

func TestMessageBuilders(t *testing.T) {
	require.Equal(t, results.Message{Role: results.RoleUser, Parts: []results.Part{results.TextPart("u")}}, results.UserText("u"))
	require.Equal(t, results.Message{Role: results.RoleSystem, Parts: []results.Part{results.TextPart("s")}}, results.SystemText("s"))
	require.Equal(t, results.Message{Role: results.RoleAssistant, Parts: []results.Part{results.TextPart("a")}}, results.AssistantText("a"))
}

func TestMessageText(t *testing.T) {
	tests := []struct {
		name  string
		parts []results.Part
		want  string
	}{
		{"no parts", nil, ""},
		{"one text", []results.Part{results.TextPart("hi")}, "hi"},
		{"parts joined in order", []results.Part{results.TextPart("a"), results.JSONPart(json.RawMessage(`{"b": 1}`)), results.TextPart("c")}, "a\n{\"b\": 1}\nc"},
		{"media becomes a placeholder", []results.Part{results.TextPart("see"), results.MediaPart("image/png", pngBytes)}, "see\n[image/png]"},
		{"media without a type", []results.Part{results.MediaPart("", nil)}, "[media]"},
		{"empty text skipped", []results.Part{results.TextPart(""), results.TextPart("x"), results.TextPart("")}, "x"},
		{"unknown part type ignored", []results.Part{{Type: "hologram", Text: "t"}, results.TextPart("x")}, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, results.Message{Parts: tt.parts}.Text())
		})
	}
}

func TestMessageMedia(t *testing.T) {
	a := results.MediaPart("image/png", []byte{1})
	b := results.MediaPart("audio/wav", []byte{2})
	m := results.Message{Parts: []results.Part{results.TextPart("x"), a, results.JSONPart(json.RawMessage(`1`)), b}}
	require.Equal(t, []results.Part{a, b}, m.Media())
	require.Nil(t, results.UserText("x").Media())
}

func TestSplitMedia(t *testing.T) {
	png := results.MediaPart("image/png", pngBytes)
	jpg := results.MediaPart("image/jpeg", []byte{0xff, 0xd8})
	in := []results.Message{
		{Role: results.RoleTool, ToolCallID: "c1", ToolName: "screenshot", Parts: []results.Part{results.TextPart("took it"), png}},
		{Role: results.RoleTool, ToolCallID: "c2", ToolName: "search", Parts: []results.Part{results.TextPart("plain")}},
		{Role: results.RoleTool, ToolCallID: "c3", ToolName: "photos", IsError: false, Parts: []results.Part{jpg, results.TextPart("two"), png}},
	}
	inCopy := make([]results.Message, len(in))
	for i, m := range in {
		inCopy[i] = m
		inCopy[i].Parts = append([]results.Part(nil), m.Parts...)
	}

	out, media := results.SplitMedia(in)
	require.Equal(t, []results.Message{
		{Role: results.RoleTool, ToolCallID: "c1", ToolName: "screenshot", Parts: []results.Part{results.TextPart("took it\n[image/png]")}},
		in[1],
		{Role: results.RoleTool, ToolCallID: "c3", ToolName: "photos", Parts: []results.Part{results.TextPart("[image/jpeg]\ntwo\n[image/png]")}},
	}, out)
	require.NotNil(t, media)
	require.Equal(t, results.Message{Role: results.RoleUser, Parts: []results.Part{
		results.TextPart("Media returned by tool call c1 (screenshot):"), png,
		results.TextPart("Media returned by tool call c3 (photos):"), jpg, png,
	}}, *media)
	for _, m := range out {
		require.Empty(t, m.Media(), "tool messages carry no media after the split")
	}
	require.Equal(t, inCopy, in, "the input messages are not modified")
}

func TestSplitMediaKeepsErrorFlagAndNeedsNoUserMessageWithoutMedia(t *testing.T) {
	in := []results.Message{
		{Role: results.RoleTool, ToolCallID: "c1", ToolName: "t", IsError: true, Parts: []results.Part{results.TextPart(`{"error":"x"}`)}},
	}
	out, media := results.SplitMedia(in)
	require.Equal(t, in, out)
	require.Nil(t, media)

	out, media = results.SplitMedia(nil)
	require.Empty(t, out)
	require.Nil(t, media)

	in[0].Parts = append(in[0].Parts, results.MediaPart("image/png", nil))
	out, media = results.SplitMedia(in)
	require.True(t, out[0].IsError)
	require.NotNil(t, media)
}
