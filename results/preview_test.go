package results_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

// diffOfLines is a diff body of n lines of width bytes each.
func diffOfLines(n, width int) string {
	line := "+" + strings.Repeat("x", width-2) + "\n"
	return strings.Repeat(line, n)
}

func previewBytes(diffs []results.FileDiff) int {
	n := 0
	for _, d := range diffs {
		n += len(d.Path) + len(d.Diff)
	}
	return n
}

func TestBoundPreviewKeepsWhatFits(t *testing.T) {
	small := []results.FileDiff{{Path: "a.go", Diff: "-a\n+b\n"}, {Path: "b.go", Diff: "+c\n"}}
	require.Equal(t, small, results.BoundPreview(small))
	require.Nil(t, results.BoundPreview(nil))

	// Exactly at the bound is not cut.
	exact := []results.FileDiff{{Path: "p", Diff: strings.Repeat("x", results.MaxPreviewBytes-1)}}
	require.Equal(t, exact, results.BoundPreview(exact))
}

func TestBoundPreviewCutsOnLinesWithMarker(t *testing.T) {
	huge := diffOfLines(10_000, 100) // 1,000,000 bytes
	in := []results.FileDiff{{Path: "big.txt", Diff: huge}, {Path: "after.txt", Diff: "+x\n"}}
	got := results.BoundPreview(in)

	require.Len(t, got, 1, "files after the cut are dropped")
	require.Equal(t, "big.txt", got[0].Path)
	require.True(t, strings.HasSuffix(got[0].Diff, results.TruncatedMarker))
	body := strings.TrimSuffix(got[0].Diff, results.TruncatedMarker)
	require.True(t, strings.HasPrefix(huge, body), "a cut keeps a prefix")
	require.True(t, strings.HasSuffix(body, "\n"), "a cut keeps whole lines")
	require.LessOrEqual(t, previewBytes(got), results.MaxPreviewBytes)
	require.Greater(t, previewBytes(got), results.MaxPreviewBytes-100-len(results.TruncatedMarker), "the cut wastes at most one line")
	require.Equal(t, huge, in[0].Diff, "the input is not modified")

	c := results.Card{CallID: "c", Tool: "t", State: results.StatePendingApproval, Preview: got}
	require.NoError(t, c.Validate())
}

func TestBoundPreviewManyFiles(t *testing.T) {
	// 200 files of 1 KiB each: the budget runs out part way.
	var in []results.FileDiff
	for i := range 200 {
		in = append(in, results.FileDiff{Path: fmt.Sprintf("f%03d.txt", i), Diff: diffOfLines(16, 64)})
	}
	got := results.BoundPreview(in)
	require.Less(t, len(got), len(in))
	require.Greater(t, len(got), 60)
	require.LessOrEqual(t, previewBytes(got), results.MaxPreviewBytes)
	for i, d := range got[:len(got)-1] {
		require.Equal(t, in[i], d, "files before the cut are whole")
	}
	require.True(t, strings.HasSuffix(got[len(got)-1].Diff, results.TruncatedMarker))
}

func TestBoundPreviewPathThatDoesNotFit(t *testing.T) {
	// The first file leaves less room than the second one's path: the
	// marker goes on the first, which the reserved room always allows.
	first := results.FileDiff{Path: "a", Diff: strings.Repeat("x", results.MaxPreviewBytes-len(results.TruncatedMarker)-1-10)}
	second := results.FileDiff{Path: strings.Repeat("p", 50), Diff: "+y\n"}
	got := results.BoundPreview([]results.FileDiff{first, second})
	require.Len(t, got, 1)
	require.Equal(t, first.Diff+results.TruncatedMarker, got[0].Diff)
	require.LessOrEqual(t, previewBytes(got), results.MaxPreviewBytes)
}

func TestBoundPreviewLongLineCutOnRune(t *testing.T) {
	// One line longer than the bound, of two-byte runes: no line end to
	// cut at, so the cut falls on a rune boundary.
	in := []results.FileDiff{{Path: "p", Diff: "+" + strings.Repeat("é", results.MaxPreviewBytes)}}
	got := results.BoundPreview(in)
	require.Len(t, got, 1)
	require.True(t, utf8.ValidString(got[0].Diff))
	require.LessOrEqual(t, previewBytes(got), results.MaxPreviewBytes)
	require.True(t, strings.HasSuffix(got[0].Diff, results.TruncatedMarker))
}

func TestCardPreviewValidate(t *testing.T) {
	// Allowed in every state: made while waiting, kept after the decision.
	for _, s := range results.States {
		c := validCard(s)
		c.Preview = []results.FileDiff{{Path: "a", Diff: "+x\n"}}
		c.PreviewNote = "write_file would change nothing: a already has this content"
		require.NoError(t, c.Validate(), s)
	}
	base := validCard(results.StatePendingApproval)
	for _, tt := range []struct {
		name string
		mod  func(*results.Card)
		want string
	}{
		{"no path", func(c *results.Card) { c.Preview = []results.FileDiff{{Diff: "+x\n"}} }, "card c1 preview 0 has no path"},
		{"over the bound", func(c *results.Card) {
			c.Preview = []results.FileDiff{{Path: "a", Diff: strings.Repeat("x", results.MaxPreviewBytes)}}
		}, "over the 65536-byte bound"},
		{"note over the bound", func(c *results.Card) { c.PreviewNote = strings.Repeat("n", results.MaxPreviewNote+1) }, "preview note is 1025 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.mod(&c)
			require.ErrorContains(t, c.Validate(), tt.want)
			_, err := json.Marshal(c)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestCardPreviewWire(t *testing.T) {
	// A card written before previews existed decodes, and encodes to the
	// same bytes: the fields are absent, not empty.
	old := `{"v":1,"call_id":"c","tool":"write_file","arguments":{"path":"a"},"state":"pending_approval"}`
	var c results.Card
	require.NoError(t, json.Unmarshal([]byte(old), &c))
	require.Nil(t, c.Preview)
	require.Empty(t, c.PreviewNote)
	b, err := json.Marshal(c)
	require.NoError(t, err)
	require.JSONEq(t, old, string(b))
	require.NotContains(t, string(b), "preview")

	// With a preview it round-trips, and an empty list reads as absent.
	c.Preview = []results.FileDiff{{Path: "a", Diff: "--- /dev/null\n+++ b/a\n@@ -0,0 +1 @@\n+x\n"}}
	c.PreviewNote = "note"
	b, err = json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(b), `"preview":[{"path":"a","diff":"--- /dev/null\n+++ b/a\n@@ -0,0 +1 @@\n+x\n"}],"preview_note":"note"`)
	var again results.Card
	require.NoError(t, json.Unmarshal(b, &again))
	require.Equal(t, c, again)

	require.NoError(t, json.Unmarshal([]byte(`{"v":1,"call_id":"c","tool":"t","state":"running","preview":[]}`), &again))
	require.Nil(t, again.Preview)
	require.ErrorContains(t, json.Unmarshal([]byte(`{"v":1,"call_id":"c","tool":"t","state":"running","preview":[{"diff":"x"}]}`), &again), "preview 0 has no path")
}

func TestRenderNeverShowsThePreview(t *testing.T) {
	// The preview is for the person deciding; the model gets the tool's
	// own answer once the call ran.
	c := results.Card{CallID: "c", Tool: "write_file", Arguments: json.RawMessage(`{}`), State: results.StateSucceeded,
		Output:      &results.Success{Parts: []results.Part{results.TextPart("updated a")}},
		Preview:     []results.FileDiff{{Path: "a", Diff: "+PREVIEW-ONLY\n"}},
		PreviewNote: "NOTE-ONLY",
	}
	m, err := results.Render(c)
	require.NoError(t, err)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NotContains(t, string(b), "PREVIEW-ONLY")
	require.NotContains(t, string(b), "NOTE-ONLY")
}
