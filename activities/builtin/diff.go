package builtin

import (
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines around each change, as
// `diff -u` and git print by default.
const diffContext = 3

// maxDiffEdits bounds the Myers search. Past it the changed region is
// shown as removed then added: still a correct diff, just not a minimal
// one, and it keeps a rewrite of a huge file from costing D² memory.
const maxDiffEdits = 2000

type editKind byte

const (
	editEqual  editKind = ' '
	editDelete editKind = '-'
	editInsert editKind = '+'
)

// edit is one line of an edit script. a and b are the line indexes in the
// old and new text before the edit applies.
type edit struct {
	kind editKind
	a, b int
}

// unifiedDiff returns the unified diff turning oldText into newText, with
// the given header names ("a/path", "b/path", or "/dev/null" for a file
// that did not exist). Equal texts give "".
func unifiedDiff(oldName, newName, oldText, newText string) string {
	a, b := splitLines(oldText), splitLines(newText)
	script := diffLines(a, b)
	var out strings.Builder
	for _, h := range hunks(script) {
		if out.Len() == 0 {
			fmt.Fprintf(&out, "--- %s\n+++ %s\n", oldName, newName)
		}
		writeHunk(&out, script[h[0]:h[1]], a, b)
	}
	return out.String()
}

// splitLines splits after each newline, keeping it, so that a last line
// without one differs from the same line with one, as in diff(1).
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// diffLines computes a shortest edit script with Myers' O(ND) algorithm,
// after trimming the common prefix and suffix that most edits leave.
func diffLines(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	script := make([]edit, 0, len(a)+len(b))
	for i := range pre {
		script = append(script, edit{editEqual, i, i})
	}
	for _, e := range myers(a[pre:len(a)-suf], b[pre:len(b)-suf]) {
		script = append(script, edit{e.kind, e.a + pre, e.b + pre})
	}
	for i := range suf {
		script = append(script, edit{editEqual, len(a) - suf + i, len(b) - suf + i})
	}
	return script
}

func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		// All removed or all added (a new file): nothing to search.
		return replaceAll(n, m)
	}
	maxD := n + m
	if maxD > maxDiffEdits {
		maxD = maxDiffEdits
	}
	// v[k+off] is the furthest x reached on diagonal k. trace[d] is v as
	// it was before step d, over diagonals -d-1..d+1.
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int
	for d := 0; d <= maxD; d++ {
		trace = append(trace, append([]int(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, n, m)
			}
		}
	}
	return replaceAll(n, m)
}

// replaceAll is the script that removes all n old lines, then adds all m
// new ones.
func replaceAll(n, m int) []edit {
	if n+m == 0 {
		return nil
	}
	script := make([]edit, 0, n+m)
	for i := range n {
		script = append(script, edit{editDelete, i, 0})
	}
	for j := range m {
		script = append(script, edit{editInsert, n, j})
	}
	return script
}

func backtrack(trace [][]int, n, m int) []edit {
	var rev []edit
	x, y := n, m
	for d := len(trace) - 1; d >= 0; d-- {
		v := trace[d]
		at := func(k int) int { return v[k+d+1] }
		k := x - y
		prevK := k - 1
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			prevK = k + 1
		}
		prevX := at(prevK)
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x, y = x-1, y-1
			rev = append(rev, edit{editEqual, x, y})
		}
		if d > 0 {
			if x == prevX {
				rev = append(rev, edit{editInsert, x, prevY})
			} else {
				rev = append(rev, edit{editDelete, prevX, y})
			}
		}
		x, y = prevX, prevY
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// hunks groups the changes of a script into [start, end) ranges with
// diffContext lines of context, merging changes whose contexts touch.
func hunks(script []edit) [][2]int {
	var out [][2]int
	for i := 0; i < len(script); {
		if script[i].kind == editEqual {
			i++
			continue
		}
		start := max(i-diffContext, 0)
		end := i
		for end < len(script) {
			if script[end].kind != editEqual {
				end++
				continue
			}
			run := end
			for run < len(script) && script[run].kind == editEqual {
				run++
			}
			if run == len(script) || run-end > 2*diffContext {
				break
			}
			end = run
		}
		stop := min(end+diffContext, len(script))
		out = append(out, [2]int{start, stop})
		i = stop
	}
	return out
}

func writeHunk(out *strings.Builder, h []edit, a, b []string) {
	oldCount, newCount := 0, 0
	for _, e := range h {
		if e.kind != editInsert {
			oldCount++
		}
		if e.kind != editDelete {
			newCount++
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(h[0].a, oldCount), hunkRange(h[0].b, newCount))
	for _, e := range h {
		line := ""
		switch e.kind {
		case editEqual, editDelete:
			line = a[e.a]
		case editInsert:
			line = b[e.b]
		}
		out.WriteByte(byte(e.kind))
		out.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange formats one side of a hunk header as diff -u does: the count
// is omitted when it is 1, and an empty side names the line before it.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}
