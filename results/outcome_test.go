package results_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

func TestKindsAreTheClosedSet(t *testing.T) {
	// The strings are the wire format; changing one breaks stored histories.
	require.Equal(t, []results.Kind{
		"success", "tool_error", "internal_error", "interrupt", "connection_required", "transfer",
	}, results.Kinds)

	seen := map[results.Kind]bool{}
	for _, g := range goldenOutcomes() {
		require.NoError(t, g.o.Validate(), g.name)
		seen[g.o.Kind] = true
	}
	for _, k := range results.Kinds {
		require.True(t, seen[k], "no golden outcome of kind %s", k)
	}
}

func TestConstructors(t *testing.T) {
	schema := json.RawMessage(`{"type":"string"}`)
	tests := []struct {
		name string
		got  results.Outcome
		want results.Outcome
	}{
		{"Succeed no parts", results.Succeed(),
			results.Outcome{Kind: results.KindSuccess, Success: &results.Success{}}},
		{"Succeed parts in order", results.Succeed(results.TextPart("a"), results.JSONPart(json.RawMessage(`1`)), results.MediaPart("image/png", []byte{1})),
			results.Outcome{Kind: results.KindSuccess, Success: &results.Success{Parts: []results.Part{
				{Type: results.PartText, Text: "a"},
				{Type: results.PartJSON, JSON: json.RawMessage(`1`)},
				{Type: results.PartMedia, MediaType: "image/png", Data: []byte{1}},
			}}}},
		{"SucceedText", results.SucceedText("hello"),
			results.Outcome{Kind: results.KindSuccess, Success: &results.Success{Parts: []results.Part{{Type: results.PartText, Text: "hello"}}}}},
		{"SucceedText empty is silent", results.SucceedText(""),
			results.Outcome{Kind: results.KindSuccess, Success: &results.Success{}}},
		{"FailTool formats", results.FailTool("no %s at line %d", "file", 3),
			results.Outcome{Kind: results.KindToolError, ToolError: &results.ToolError{Message: "no file at line 3"}}},
		{"FailTool without args keeps percent", results.FailTool("100%% sure"),
			results.Outcome{Kind: results.KindToolError, ToolError: &results.ToolError{Message: "100% sure"}}},
		{"FailInternal", results.FailInternal("r1", "db down"),
			results.Outcome{Kind: results.KindInternalError, Internal: &results.InternalError{Ref: "r1", Detail: "db down"}}},
		{"NeedApproval", results.NeedApproval("ok?", "plan"),
			results.Outcome{Kind: results.KindInterrupt, Interrupt: &results.Interrupt{Type: results.InterruptApproval, Prompt: "ok?", Plan: "plan"}}},
		{"NeedChoice", results.NeedChoice("which?", results.Option{ID: "a"}, results.Option{ID: "b", Label: "B"}),
			results.Outcome{Kind: results.KindInterrupt, Interrupt: &results.Interrupt{Type: results.InterruptChoice, Prompt: "which?", Options: []results.Option{{ID: "a"}, {ID: "b", Label: "B"}}}}},
		{"NeedAnswer", results.NeedAnswer("name?", schema),
			results.Outcome{Kind: results.KindInterrupt, Interrupt: &results.Interrupt{Type: results.InterruptQuestion, Prompt: "name?", Schema: schema}}},
		{"NeedAnswer without schema", results.NeedAnswer("name?", nil),
			results.Outcome{Kind: results.KindInterrupt, Interrupt: &results.Interrupt{Type: results.InterruptQuestion, Prompt: "name?"}}},
		{"NeedConnection", results.NeedConnection("github", "go here", "repo", "user"),
			results.Outcome{Kind: results.KindConnectionRequired, Connection: &results.ConnectionRequired{Provider: "github", Hint: "go here", Scopes: []string{"repo", "user"}}}},
		{"TransferTo", results.TransferTo("billing", "why"),
			results.Outcome{Kind: results.KindTransfer, Transfer: &results.Transfer{Target: "billing", Message: "why"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.got)
			require.NoError(t, tt.got.Validate())
		})
	}
}

func TestPartConstructors(t *testing.T) {
	require.Equal(t, results.Part{Type: results.PartText, Text: "x"}, results.TextPart("x"))
	require.Equal(t, results.Part{Type: results.PartMedia, MediaType: "audio/wav", Data: []byte("RIFF")}, results.MediaPart("audio/wav", []byte("RIFF")))
	require.Equal(t, results.Part{Type: results.PartJSON, JSON: json.RawMessage(`[1]`)}, results.JSONPart(json.RawMessage(`[1]`)))
}

// withHelpers are the With* methods, each applied with a value that would
// change a success.
var withHelpers = []struct {
	name  string
	apply func(results.Outcome) results.Outcome
}{
	{"WithSources", func(o results.Outcome) results.Outcome { return o.WithSources(results.Source{URL: "https://x"}) }},
	{"WithWorkDir", func(o results.Outcome) results.Outcome { return o.WithWorkDir("/new") }},
	{"WithDiffs", func(o results.Outcome) results.Outcome { return o.WithDiffs(results.FileDiff{Path: "p", Diff: "d"}) }},
	{"WithDetails", func(o results.Outcome) results.Outcome { return o.WithDetails(json.RawMessage(`{"k":1}`)) }},
}

func TestWithHelpersLeaveNonSuccessUnchanged(t *testing.T) {
	others := func() []results.Outcome {
		out := []results.Outcome{
			{Kind: results.KindSuccess}, // success kind but no body: nothing to attach to
		}
		for _, g := range goldenOutcomes() {
			if g.o.Kind != results.KindSuccess {
				out = append(out, g.o)
			}
		}
		return out
	}
	for _, h := range withHelpers {
		// want is built separately so that a helper writing through the
		// receiver's body pointer would show up as a difference.
		want := others()
		for i, o := range others() {
			t.Run(h.name+"/"+string(o.Kind), func(t *testing.T) {
				got := h.apply(o)
				require.Equal(t, want[i], got)
				require.Equal(t, want[i], o)
			})
		}
	}
}

func TestWithHelpersOnSuccess(t *testing.T) {
	base := results.SucceedText("out")
	require.Equal(t, []results.Source{{URL: "a", Title: "A"}, {URL: "b"}},
		base.WithSources(results.Source{URL: "a", Title: "A"}).WithSources(results.Source{URL: "b"}).Success.Sources)
	require.Equal(t, []results.FileDiff{{Path: "x", Diff: "1"}, {Path: "y", Diff: "2"}},
		base.WithDiffs(results.FileDiff{Path: "x", Diff: "1"}).WithDiffs(results.FileDiff{Path: "y", Diff: "2"}).Success.Diffs)
	require.Equal(t, "/b", base.WithWorkDir("/a").WithWorkDir("/b").Success.WorkDir)
	require.JSONEq(t, `{"k":2}`, string(base.WithDetails(json.RawMessage(`{"k":1}`)).WithDetails(json.RawMessage(`{"k":2}`)).Success.Details))

	// Every helper leaves the receiver's body as it was.
	for _, h := range withHelpers {
		t.Run(h.name, func(t *testing.T) {
			o := results.SucceedText("out")
			snapshot := *o.Success
			got := h.apply(o)
			require.Equal(t, snapshot, *o.Success)
			require.NotSame(t, o.Success, got.Success)
			require.Equal(t, []results.Part{results.TextPart("out")}, got.Success.Parts)
		})
	}
}

func TestWithHelpersDoNotShareBackingArrays(t *testing.T) {
	// Spare capacity is what a naive append would write into, so that two
	// outcomes derived from one base would overwrite each other.
	sources := make([]results.Source, 1, 8)
	sources[0] = results.Source{URL: "base"}
	diffs := make([]results.FileDiff, 1, 8)
	diffs[0] = results.FileDiff{Path: "base"}
	base := results.Outcome{Kind: results.KindSuccess, Success: &results.Success{Sources: sources, Diffs: diffs}}

	s1 := base.WithSources(results.Source{URL: "one"})
	s2 := base.WithSources(results.Source{URL: "two"})
	require.Equal(t, []results.Source{{URL: "base"}, {URL: "one"}}, s1.Success.Sources)
	require.Equal(t, []results.Source{{URL: "base"}, {URL: "two"}}, s2.Success.Sources)
	require.Len(t, base.Success.Sources, 1)
	require.Equal(t, results.Source{}, base.Success.Sources[:2][1])

	d1 := base.WithDiffs(results.FileDiff{Path: "one"})
	d2 := base.WithDiffs(results.FileDiff{Path: "two"})
	require.Equal(t, []results.FileDiff{{Path: "base"}, {Path: "one"}}, d1.Success.Diffs)
	require.Equal(t, []results.FileDiff{{Path: "base"}, {Path: "two"}}, d2.Success.Diffs)
	require.Len(t, base.Success.Diffs, 1)
	require.Equal(t, results.FileDiff{}, base.Success.Diffs[:2][1])

	// Writing into a derived outcome's list must not reach the base.
	s1.Success.Sources[0].URL = "changed"
	require.Equal(t, "base", base.Success.Sources[0].URL)
}

func TestOutcomeValidateRejectsMalformed(t *testing.T) {
	success := func(s results.Success) results.Outcome {
		return results.Outcome{Kind: results.KindSuccess, Success: &s}
	}
	interrupt := func(i results.Interrupt) results.Outcome {
		return results.Outcome{Kind: results.KindInterrupt, Interrupt: &i}
	}
	tests := []struct {
		name    string
		o       results.Outcome
		wantErr string
	}{
		{"zero value", results.Outcome{}, "outcome has no kind"},
		{"no kind but a body", results.Outcome{ToolError: &results.ToolError{Message: "x"}}, "outcome has no kind"},
		{"unknown kind", results.Outcome{Kind: "teleport"}, `unknown outcome kind "teleport"`},
		{"two bodies", results.Outcome{Kind: results.KindSuccess, Success: &results.Success{}, ToolError: &results.ToolError{Message: "x"}}, "more than one body"},
		{"success without body", results.Outcome{Kind: results.KindSuccess}, `kind "success" has no success body`},
		{"success with another kind's body", results.Outcome{Kind: results.KindSuccess, ToolError: &results.ToolError{Message: "x"}}, "has no success body"},
		{"tool_error without body", results.Outcome{Kind: results.KindToolError}, "has no tool_error body"},
		{"internal_error without body", results.Outcome{Kind: results.KindInternalError}, "has no internal_error body"},
		{"interrupt without body", results.Outcome{Kind: results.KindInterrupt}, "has no interrupt body"},
		{"connection_required without body", results.Outcome{Kind: results.KindConnectionRequired}, "has no connection_required body"},
		{"transfer without body", results.Outcome{Kind: results.KindTransfer}, "has no transfer body"},
		{"part without type", results.Succeed(results.Part{Text: "x"}), "success part 0: part has no type"},
		{"part of unknown type", results.Succeed(results.TextPart("ok"), results.Part{Type: "video"}), `success part 1: unknown part type "video"`},
		{"media part without media type", results.Succeed(results.MediaPart("", []byte{1})), "media part has no media_type"},
		{"json part with invalid JSON", results.Succeed(results.JSONPart(json.RawMessage(`{`))), "json part does not hold valid JSON"},
		{"json part that is empty", results.Succeed(results.JSONPart(nil)), "json part does not hold valid JSON"},
		{"source without url", success(results.Success{Sources: []results.Source{{URL: "https://a"}, {Title: "t"}}}), "success source 1 has no url"},
		{"diff without path", success(results.Success{Diffs: []results.FileDiff{{Diff: "d"}}}), "success diff 0 has no path"},
		{"details not JSON", success(results.Success{Details: json.RawMessage(`not json`)}), "details are not valid JSON"},
		{"tool_error with empty message", results.FailTool(""), "tool_error has an empty message"},
		{"internal_error without ref", results.FailInternal("", "detail"), "internal_error has no reference id"},
		{"interrupt without type", interrupt(results.Interrupt{Prompt: "p"}), "interrupt has no type"},
		{"interrupt of unknown type", interrupt(results.Interrupt{Type: "telepathy"}), `unknown interrupt type "telepathy"`},
		{"choice without options", results.NeedChoice("p"), "choice interrupt has no options"},
		{"choice option without id", results.NeedChoice("p", results.Option{ID: "a"}, results.Option{Label: "B"}), "option without an id"},
		{"choice repeats an option", results.NeedChoice("p", results.Option{ID: "a"}, results.Option{ID: "a"}), `repeats option "a"`},
		{"question schema not JSON", results.NeedAnswer("p", json.RawMessage(`{"type":`)), "schema is not valid JSON"},
		{"approval schema not JSON", interrupt(results.Interrupt{Type: results.InterruptApproval, Schema: json.RawMessage(`x`)}), "schema is not valid JSON"},
		{"connection without provider", results.NeedConnection("", "hint"), "connection_required names no provider"},
		{"transfer without target", results.TransferTo("", "msg"), "transfer names no target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			require.ErrorContains(t, err, tt.wantErr)
			// A malformed outcome must not be encodable either.
			_, err = json.Marshal(tt.o)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestOutcomeValidateAcceptsEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		o    results.Outcome
	}{
		{"empty text part", results.Succeed(results.TextPart(""))},
		{"media part without data", results.Succeed(results.MediaPart("image/png", nil))},
		{"json null", results.Succeed(results.JSONPart(json.RawMessage(`null`)))},
		{"approval without plan", results.NeedApproval("ok?", "")},
		{"question without prompt", results.NeedAnswer("", nil)},
		{"choice options with labels only differing", results.NeedChoice("p", results.Option{ID: "a", Label: "x"}, results.Option{ID: "b", Label: "x"})},
		{"internal error without detail", results.FailInternal("r", "")},
		{"transfer without message", results.TransferTo("t", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.o.Validate())
		})
	}
}
