package results_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

const marker = results.TruncatedMarker

func TestTruncatedMarker(t *testing.T) {
	require.Equal(t, "\n[truncated]", marker)
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		limits  results.Limits
		want    string
		wantCut bool
	}{
		{"no limits", "a\nb\nc", results.Limits{}, "a\nb\nc", false},
		{"negative limits mean none", "abc", results.Limits{MaxBytes: -1, MaxLines: -1}, "abc", false},
		{"empty input", "", results.Limits{MaxBytes: 1, MaxLines: 1}, "", false},
		{"under byte limit", "abc", results.Limits{MaxBytes: 4}, "abc", false},
		{"exactly at byte limit", "abc", results.Limits{MaxBytes: 3}, "abc", false},
		{"byte limit counts the marker", strings.Repeat("x", 30), results.Limits{MaxBytes: 20}, strings.Repeat("x", 8) + marker, true},
		{"byte limit exactly the marker", strings.Repeat("x", 30), results.Limits{MaxBytes: len(marker)}, marker, true},
		{"byte limit below the marker keeps the marker", strings.Repeat("x", 30), results.Limits{MaxBytes: 3}, marker, true},
		{"under line limit", "a\nb", results.Limits{MaxLines: 3}, "a\nb", false},
		{"exactly at line limit", "a\nb\nc", results.Limits{MaxLines: 3}, "a\nb\nc", false},
		{"trailing newline is not a line", "a\nb\n", results.Limits{MaxLines: 2}, "a\nb\n", false},
		{"line limit cuts", "a\nb\nc\nd", results.Limits{MaxLines: 2}, "a\nb" + marker, true},
		{"one line", "first\nsecond", results.Limits{MaxLines: 1}, "first" + marker, true},
		{"empty lines count", "a\n\n\nb", results.Limits{MaxLines: 2}, "a\n" + marker, true},
		{"lines then bytes", "aaaa\nbbbb\ncccc", results.Limits{MaxLines: 2, MaxBytes: 18}, "aaaa\nb" + marker, true},
		{"lines cut fits the bytes", "aa\nbb\ncc", results.Limits{MaxLines: 2, MaxBytes: 100}, "aa\nbb" + marker, true},
		{"bytes bind before lines", strings.Repeat("x", 40) + "\ny", results.Limits{MaxLines: 5, MaxBytes: 22}, strings.Repeat("x", 10) + marker, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := results.Truncate(tt.in, tt.limits)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.wantCut, cut)
		})
	}
}

// TestTruncateNeverSplitsARune tries every byte limit against text made of
// 1-, 2-, 3- and 4-byte runes, so that every cut position lands once on
// each byte of each sequence.
func TestTruncateNeverSplitsARune(t *testing.T) {
	inputs := []string{
		strings.Repeat("aé€😀", 6),
		strings.Repeat("😀", 10),
		strings.Repeat("€x", 10),
		"é" + strings.Repeat("日本語", 8),
	}
	for _, s := range inputs {
		for limit := 1; limit <= len(s)+len(marker)+1; limit++ {
			got, cut := results.Truncate(s, results.Limits{MaxBytes: limit})
			require.True(t, utf8.ValidString(got), "limit %d: %q", limit, got)
			if len(s) <= limit {
				require.False(t, cut)
				require.Equal(t, s, got)
				continue
			}
			require.True(t, cut, "limit %d", limit)
			require.True(t, strings.HasSuffix(got, marker))
			kept := strings.TrimSuffix(got, marker)
			require.True(t, strings.HasPrefix(s, kept))
			require.LessOrEqual(t, len(got), max(limit, len(marker)))
			// The cut keeps as much as fits: the next rune would not.
			budget := limit - len(marker)
			if budget > 0 {
				_, size := utf8.DecodeRuneInString(s[len(kept):])
				require.Greater(t, len(kept)+size, budget, "limit %d kept %q", limit, kept)
			}
		}
	}
}

func TestTruncateLinesOfMultibyteText(t *testing.T) {
	s := "日本\n語😀\né€\n最後"
	for lines := 1; lines <= 5; lines++ {
		got, cut := results.Truncate(s, results.Limits{MaxLines: lines})
		require.True(t, utf8.ValidString(got))
		if lines >= 4 {
			require.False(t, cut)
			require.Equal(t, s, got)
			continue
		}
		require.True(t, cut)
		kept := strings.TrimSuffix(got, marker)
		require.Equal(t, strings.Join(strings.Split(s, "\n")[:lines], "\n"), kept)
	}
}

func TestTruncateOutputLeavesOtherKindsAlone(t *testing.T) {
	for _, g := range goldenOutcomes() {
		if g.o.Kind == results.KindSuccess {
			continue
		}
		require.Equal(t, g.o, g.o.TruncateOutput(results.Limits{MaxBytes: 1, MaxLines: 1}), g.name)
	}
	bodiless := results.Outcome{Kind: results.KindSuccess}
	require.Equal(t, bodiless, bodiless.TruncateOutput(results.Limits{MaxBytes: 1}))
}

func TestTruncateOutputUnderTheLimits(t *testing.T) {
	o := results.Succeed(results.TextPart("short"), results.JSONPart(json.RawMessage(`{"big":"`+strings.Repeat("j", 100)+`"}`)))
	got := o.TruncateOutput(results.Limits{MaxBytes: 50, MaxLines: 2})
	require.Equal(t, o, got)
	require.False(t, got.Success.Truncated)
	require.Empty(t, got.Success.Raw)
}

func TestTruncateOutputKeepsRaw(t *testing.T) {
	long := strings.Repeat("line of output\n", 100)
	o := results.Succeed(results.TextPart(long))
	got := o.TruncateOutput(results.Limits{MaxLines: 3})

	require.True(t, got.Success.Truncated)
	require.Equal(t, long, got.Success.Raw)
	require.Equal(t, []results.Part{results.TextPart("line of output\nline of output\nline of output" + marker)}, got.Success.Parts)
	// The receiver is not modified.
	require.Equal(t, []results.Part{results.TextPart(long)}, o.Success.Parts)
	require.False(t, o.Success.Truncated)
	require.Empty(t, o.Success.Raw)

	// A Raw the tool set itself (say, with output it never put in a
	// part) wins over the joined text.
	o.Success.Raw = "the tool's own raw"
	require.Equal(t, "the tool's own raw", o.TruncateOutput(results.Limits{MaxLines: 3}).Success.Raw)
}

func TestTruncateOutputBoundsAllTextPartsTogether(t *testing.T) {
	png := results.MediaPart("image/png", pngBytes)
	js := results.JSONPart(json.RawMessage(`{"a":1}`))
	o := results.Succeed(
		results.TextPart(strings.Repeat("a", 30)),
		png,
		results.TextPart(strings.Repeat("b", 30)),
		js,
		results.TextPart(strings.Repeat("c", 30)),
	)
	got := o.TruncateOutput(results.Limits{MaxBytes: 50})
	// 30 a's, the newline that joins them to the b's, 7 b's and the
	// marker make 50 bytes; the c's are past the cut and dropped.
	require.Equal(t, []results.Part{
		results.TextPart(strings.Repeat("a", 30)),
		png,
		results.TextPart(strings.Repeat("b", 7) + marker),
		js,
	}, got.Success.Parts)
	require.Equal(t, strings.Repeat("a", 30)+"\n"+strings.Repeat("b", 30)+"\n"+strings.Repeat("c", 30), got.Success.Raw)
	require.True(t, got.Success.Truncated)

	// Each part alone is under the limit, but together they are not.
	many := results.Succeed(results.TextPart("one"), results.TextPart("two"), results.TextPart("three"))
	got = many.TruncateOutput(results.Limits{MaxLines: 2})
	require.Equal(t, []results.Part{results.TextPart("one"), results.TextPart("two" + marker)}, got.Success.Parts)
}

func TestTruncateOutputCutAtAPartBoundary(t *testing.T) {
	o := results.Succeed(results.TextPart("a\nb"), results.TextPart("c"))
	got := o.TruncateOutput(results.Limits{MaxLines: 1})
	require.Equal(t, []results.Part{results.TextPart("a" + marker)}, got.Success.Parts)

	o = results.Succeed(results.TextPart("ab"), results.TextPart("cd"))
	got = o.TruncateOutput(results.Limits{MaxLines: 1})
	require.Equal(t, []results.Part{results.TextPart("ab" + marker)}, got.Success.Parts)

	// A budget that ends right after the joining newline leaves the next
	// part holding only the marker.
	o = results.Succeed(results.TextPart("abc"), results.TextPart(strings.Repeat("d", 40)))
	got = o.TruncateOutput(results.Limits{MaxBytes: 4 + len(marker)})
	require.Equal(t, []results.Part{results.TextPart("abc"), results.TextPart(marker)}, got.Success.Parts)
}

// TestTruncateOutputRenderedWithinLimits checks the promise that matters:
// what the model is shown of a truncated output fits the limits, whatever
// the split into parts, and a second truncation changes nothing.
func TestTruncateOutputRenderedWithinLimits(t *testing.T) {
	texts := []string{"", "x", "é€😀", strings.Repeat("word ", 20), "l1\nl2\nl3\nl4\n", strings.Repeat("日本\n", 9)}
	for a := range texts {
		for b := range texts {
			for c := range texts {
				o := results.Succeed(results.TextPart(texts[a]), results.TextPart(texts[b]), results.TextPart(texts[c]))
				for _, lim := range []results.Limits{{MaxBytes: 13}, {MaxBytes: 40}, {MaxLines: 1}, {MaxLines: 3}, {MaxBytes: 30, MaxLines: 2}} {
					got := o.TruncateOutput(lim)
					var joined []string
					for _, p := range got.Success.Parts {
						require.True(t, utf8.ValidString(p.Text))
						joined = append(joined, p.Text)
					}
					all := strings.Join(joined, "\n")
					if lim.MaxBytes > 0 {
						require.LessOrEqual(t, len(all), lim.MaxBytes, "%v %q", lim, all)
					}
					if lim.MaxLines > 0 && got.Success.Truncated {
						require.LessOrEqual(t, strings.Count(strings.TrimSuffix(all, marker), "\n")+1, lim.MaxLines, "%v %q", lim, all)
					}
					require.Equal(t, got.Success.Truncated, strings.Contains(all, marker))
					require.Equal(t, got, got.TruncateOutput(lim), "truncating twice changes nothing")
				}
			}
		}
	}
}

func TestTruncateOutputBoundsDiffs(t *testing.T) {
	huge := results.FileDiff{Path: "big.txt", Diff: strings.Repeat("+line\n", 40_000)}
	o := results.SucceedText("rewrote big.txt").WithDiffs(huge, results.FileDiff{Path: "after.txt", Diff: "+x\n"})
	got := o.TruncateOutput(results.Limits{MaxBytes: 1 << 20})
	require.True(t, got.Success.Truncated)
	require.Len(t, got.Success.Diffs, 1, "files past the bound are dropped")
	require.LessOrEqual(t, len(got.Success.Diffs[0].Path)+len(got.Success.Diffs[0].Diff), results.MaxPreviewBytes)
	require.True(t, strings.HasSuffix(got.Success.Diffs[0].Diff, marker))
	require.Equal(t, []results.Part{results.TextPart("rewrote big.txt")}, got.Success.Parts, "the text is under its limit and kept")
	require.Len(t, o.Success.Diffs, 2, "the outcome itself is not modified")

	small := results.SucceedText("ok").WithDiffs(results.FileDiff{Path: "a", Diff: "+a\n"})
	require.Equal(t, small, small.TruncateOutput(results.Limits{MaxBytes: 100}))
}
