package results

import (
	"fmt"
	"strings"
)

// MaxPreviewBytes bounds a card's preview: the paths and diff texts of all
// its files together. Cards travel in every query answer, in webhooks and
// on the inbox page, so a rewrite of a large file must not ride along
// whole. BoundPreview cuts a preview to it.
const MaxPreviewBytes = 64 << 10

// MaxPreviewNote bounds a card's preview note, a sentence.
const MaxPreviewNote = 1 << 10

// previewSize is what MaxPreviewBytes counts.
func previewSize(diffs []FileDiff) int {
	n := 0
	for _, d := range diffs {
		n += len(d.Path) + len(d.Diff)
	}
	return n
}

// BoundPreview returns diffs cut to MaxPreviewBytes. Files are kept in
// order while they fit; the file where the budget runs out keeps the whole
// lines of its diff that fit and ends with TruncatedMarker, and the files
// after it are dropped. When not even that file's path fits, the marker
// goes on the last file kept. diffs itself is not modified.
func BoundPreview(diffs []FileDiff) []FileDiff {
	if previewSize(diffs) <= MaxPreviewBytes {
		return diffs
	}
	// The marker's room is set aside from the start, so that wherever the
	// cut falls the marker still fits.
	room := MaxPreviewBytes - len(TruncatedMarker)
	var out []FileDiff
	for _, d := range diffs {
		if size := len(d.Path) + len(d.Diff); size <= room {
			out = append(out, d)
			room -= size
			continue
		}
		if len(d.Path) <= room {
			d.Diff = cutLines(d.Diff, room-len(d.Path)) + TruncatedMarker
			out = append(out, d)
		} else if len(out) > 0 {
			out[len(out)-1].Diff += TruncatedMarker
		}
		break
	}
	return out
}

// cutLines returns the longest prefix of s of at most n bytes that ends
// at a line end, so that a cut diff holds only whole lines. A first line
// longer than n is cut at a rune boundary instead.
func cutLines(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if i := strings.LastIndexByte(s[:n], '\n'); i >= 0 {
		return s[:i+1]
	}
	cut, _ := Truncate(s, Limits{MaxBytes: n + len(TruncatedMarker)})
	return strings.TrimSuffix(cut, TruncatedMarker)
}

// validatePreview holds a card's preview to what BoundPreview produces.
func (c Card) validatePreview() error {
	for i, d := range c.Preview {
		if d.Path == "" {
			return fmt.Errorf("card %s preview %d has no path", c.CallID, i)
		}
	}
	if n := previewSize(c.Preview); n > MaxPreviewBytes {
		return fmt.Errorf("card %s preview is %d bytes, over the %d-byte bound", c.CallID, n, MaxPreviewBytes)
	}
	if len(c.PreviewNote) > MaxPreviewNote {
		return fmt.Errorf("card %s preview note is %d bytes, over the %d-byte bound", c.CallID, len(c.PreviewNote), MaxPreviewNote)
	}
	return nil
}
