package workflows

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"

	"github.com/tollgate-dev/tollgate/results"
)

func TestCallSummaryNamesWhatTheCallTouches(t *testing.T) {
	for args, want := range map[string]string{
		`{"path":"summary.md","content":"# long\ntext"}`: "write_file summary.md",
		`{"content":"x","url":"https://example.com/a"}`:  "write_file https://example.com/a",
		`{"b":"second","a":"first"}`:                     "write_file first",
		`{"n":3}`:                                        "write_file",
		`not json`:                                       "write_file",
	} {
		require.Equal(t, want, callSummary("write_file", json.RawMessage(args)), args)
	}
	long := callSummary("shell", json.RawMessage(`{"command":"`+strings.Repeat(`echo hi;\n`, 20)+`"}`))
	require.Equal(t, maxSummaryRunes, utf8.RuneCountInString(long))
	require.True(t, strings.HasPrefix(long, "shell echo hi; echo hi;"), long)
	require.True(t, strings.HasSuffix(long, "…"), long)
}

func TestStartSummaryIsThePromptsFirstLine(t *testing.T) {
	s, d := StartSummary(Input{Prompt: "Summarise notes.txt\ninto summary.md", Model: "scripted:demo", Tools: []string{"read_file"}, User: "ann"})
	require.Equal(t, "Summarise notes.txt", s)
	require.Equal(t, "model `scripted:demo`, tools read_file, for ann", d)
	s, _ = StartSummary(Input{Messages: make([]results.Message, 3), Model: "m"})
	require.Equal(t, "continues a conversation of 3 messages", s)
}

// The turn's current details list the calls waiting for a person while
// they wait, and what the turn has used so far.
func TestCurrentDetailsListTheWaitingCalls(t *testing.T) {
	h := newHarness(t, calls("", tc("w1", "write", `{"path":"a.md","content":"b"}`), tc("a1", "ask", `{"prompt":"tone?"}`)), results.AssistantText("ok"))
	details := func() string {
		v, err := h.env.QueryWorkflow("__temporal_workflow_metadata")
		require.NoError(t, err)
		var md sdkpb.WorkflowMetadata
		require.NoError(t, v.Get(&md))
		return md.GetCurrentDetails()
	}
	var parked, after string
	h.env.RegisterDelayedCallback(func() { parked = details() }, time.Minute)
	h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove}, nil)
	h.respond(3*time.Minute, Response{CallID: "a1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"formal"`)}, nil)
	h.env.RegisterDelayedCallback(func() { after = details() }, 150*time.Second)
	h.run(t, Input{Prompt: "p", Tools: []string{"write", "ask"}})

	require.Equal(t, "**Waiting for a person**\n- `w1` write a.md: pending approval\n- `a1` ask tone?: waiting for an answer: tone?\n\n**Used** 15 tokens, $0.0200, 1 model call\n", parked)
	require.Equal(t, "**Waiting for a person**\n- `a1` ask tone?: waiting for an answer: tone?\n\n**Used** 15 tokens, $0.0200, 1 model call\n", after)
}

func TestThousands(t *testing.T) {
	require.Equal(t, "0", thousands(0))
	require.Equal(t, "999", thousands(999))
	require.Equal(t, "1,000", thousands(1000))
	require.Equal(t, "12,345,678", thousands(12345678))
}
