package results

import (
	"strings"
	"unicode/utf8"
)

// TruncatedMarker ends any text cut short for the model.
const TruncatedMarker = "\n[truncated]"

// Limits bound what the model is shown of one output. Zero means no limit.
type Limits struct {
	MaxBytes int `json:"max_bytes,omitempty"`
	MaxLines int `json:"max_lines,omitempty"`
}

// Truncate cuts s to at most limits.MaxLines lines and limits.MaxBytes
// bytes (marker included), never inside a UTF-8 sequence, and reports
// whether it cut anything. What it keeps is always a prefix of s. The
// marker is never dropped, so a MaxBytes below len(TruncatedMarker) yields
// the marker alone; the marker's own line is not counted against MaxLines.
func Truncate(s string, limits Limits) (string, bool) {
	cut := false
	if limits.MaxLines > 0 {
		n := 0
		for i := 0; i < len(s); i++ {
			if s[i] == '\n' {
				n++
				if n == limits.MaxLines {
					if i < len(s)-1 {
						s, cut = s[:i], true
					}
					break
				}
			}
		}
	}
	if limits.MaxBytes > 0 && len(s)+boolLen(cut) > limits.MaxBytes {
		keep := limits.MaxBytes - len(TruncatedMarker)
		if keep < 0 {
			keep = 0
		}
		if keep < len(s) {
			for keep > 0 && !utf8.RuneStart(s[keep]) {
				keep--
			}
			s, cut = s[:keep], true
		}
	}
	if cut {
		return s + TruncatedMarker, true
	}
	return s, false
}

func boolLen(cut bool) int {
	if cut {
		return len(TruncatedMarker)
	}
	return 0
}

// TruncateOutput applies limits to a success's text parts, keeping the
// untruncated text in Raw. Other kinds are returned unchanged.
//
// The limits bound the text parts together, joined with newlines as the
// model sees them, not each part on its own: otherwise a tool returning
// many parts would escape them. The part where the cut falls ends with the
// marker and the text parts after it are dropped; media and JSON parts are
// kept in place.
//
// Diffs are held to MaxPreviewBytes as previews are (BoundPreview): they
// ride in the card and in every query answer, and a tool that rewrote a
// large file must not carry the whole rewrite there.
func (o Outcome) TruncateOutput(limits Limits) Outcome {
	if o.Kind != KindSuccess || o.Success == nil {
		return o
	}
	s := *o.Success
	if previewSize(s.Diffs) > MaxPreviewBytes {
		s.Diffs = BoundPreview(s.Diffs)
		s.Truncated = true
		o.Success = &s
	}
	var texts []string
	for _, p := range s.Parts {
		if p.Type == PartText {
			texts = append(texts, p.Text)
		}
	}
	all := strings.Join(texts, "\n")
	t, cut := Truncate(all, limits)
	if !cut {
		return o
	}
	// Truncate keeps a prefix of all, so the cut is an offset into it.
	keep := len(t) - len(TruncatedMarker)
	parts := make([]Part, 0, len(s.Parts))
	off, done := 0, false
	for _, p := range s.Parts {
		if p.Type != PartText {
			parts = append(parts, p)
			continue
		}
		if done {
			continue
		}
		end := off + len(p.Text)
		if keep <= end {
			p.Text = p.Text[:keep-off] + TruncatedMarker
			done = true
		}
		parts = append(parts, p)
		off = end + 1
	}
	s.Parts = parts
	s.Truncated = true
	if s.Raw == "" {
		s.Raw = all
	}
	o.Success = &s
	return o
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= max {
		return s
	}
	cut := max - 1
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
