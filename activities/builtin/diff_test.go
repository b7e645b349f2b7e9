package builtin

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{name: "equal", old: "a\nb\n", new: "a\nb\n", want: ""},
		{name: "both empty", want: ""},
		{
			name: "create", old: "", new: "one\ntwo\n",
			want: "--- a/f\n+++ b/f\n@@ -0,0 +1,2 @@\n+one\n+two\n",
		},
		{
			name: "empty out", old: "one\n", new: "",
			want: "--- a/f\n+++ b/f\n@@ -1 +0,0 @@\n-one\n",
		},
		{
			name: "change one line",
			old:  "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			new:  "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			want: "--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n",
		},
		{
			name: "two hunks",
			old:  "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n",
			new:  "one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\nfifteen\n",
			want: "--- a/f\n+++ b/f\n@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -12,4 +12,4 @@\n 12\n 13\n 14\n-15\n+fifteen\n",
		},
		{
			name: "close changes share a hunk",
			old:  "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n",
			new:  "1\nB\n3\n4\n5\n6\n7\n8\nI\n10\n",
			want: "--- a/f\n+++ b/f\n@@ -1,10 +1,10 @@\n 1\n-2\n+B\n 3\n 4\n 5\n 6\n 7\n 8\n-9\n+I\n 10\n",
		},
		{
			name: "no newline at end",
			old:  "a\nb",
			new:  "a\nb\n",
			want: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, unifiedDiff("a/f", "b/f", tt.old, tt.new))
		})
	}
}

// TestUnifiedDiffAppliesWithPatch checks random edits both ways: our own
// applier must rebuild the new text, and GNU patch must accept the diff
// when it is installed.
func TestUnifiedDiffAppliesWithPatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	patchBin, _ := exec.LookPath("patch")
	dir := t.TempDir()
	for i := range 200 {
		a := randomText(rng)
		b := mutate(rng, a)
		d := unifiedDiff("a/f", "b/f", a, b)
		if a == b {
			require.Empty(t, d)
			continue
		}
		got, err := applyUnified(a, d)
		require.NoError(t, err, "case %d\nold:\n%s\nnew:\n%s\ndiff:\n%s", i, a, b, d)
		require.Equal(t, b, got, "case %d diff:\n%s", i, d)
		if patchBin != "" && i%10 == 0 {
			f := filepath.Join(dir, "f")
			require.NoError(t, os.WriteFile(f, []byte(a), 0o600))
			cmd := exec.Command(patchBin, "-s", "-p1", "--no-backup-if-mismatch")
			cmd.Dir = dir
			cmd.Stdin = strings.NewReader(d)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "patch: %s\ndiff:\n%s", out, d)
			patched, err := os.ReadFile(f)
			require.NoError(t, err)
			require.Equal(t, b, string(patched))
		}
	}
}

func TestMyersIsMinimal(t *testing.T) {
	a := splitLines("a\nb\nc\na\nb\nb\na\n")
	b := splitLines("c\nb\na\nb\na\nc\n")
	changes := 0
	for _, e := range diffLines(a, b) {
		if e.kind != editEqual {
			changes++
		}
	}
	require.Equal(t, 5, changes, "the classic Myers example needs 5 edits")
}

func TestLargeRewriteFallsBack(t *testing.T) {
	var a, b strings.Builder
	for i := range maxDiffEdits {
		fmt.Fprintf(&a, "old %d\n", i)
		fmt.Fprintf(&b, "new %d\n", i)
	}
	d := unifiedDiff("a/f", "b/f", a.String(), b.String())
	got, err := applyUnified(a.String(), d)
	require.NoError(t, err)
	require.Equal(t, b.String(), got)
}

func randomText(rng *rand.Rand) string {
	var s strings.Builder
	for range rng.IntN(30) {
		s.WriteString(strconv.Itoa(rng.IntN(6)))
		s.WriteByte('\n')
	}
	if rng.IntN(4) == 0 {
		s.WriteString("tail")
	}
	return s.String()
}

func mutate(rng *rand.Rand, s string) string {
	lines := splitLines(s)
	for range rng.IntN(6) {
		switch i := rng.IntN(len(lines) + 1); rng.IntN(3) {
		case 0:
			lines = append(lines[:i], append([]string{"new" + strconv.Itoa(rng.IntN(3)) + "\n"}, lines[i:]...)...)
		case 1:
			if i < len(lines) {
				lines = append(lines[:i], lines[i+1:]...)
			}
		case 2:
			if i < len(lines) {
				lines[i] = "changed\n"
			}
		}
	}
	return strings.Join(lines, "")
}

// applyUnified applies a diff produced by unifiedDiff, checking every
// context and removed line against old.
func applyUnified(old, diff string) (string, error) {
	a := splitLines(old)
	lines := strings.SplitAfter(diff, "\n")
	var out []string
	pos := 0
	for i := 2; i < len(lines) && lines[i] != ""; i++ {
		l := lines[i]
		if strings.HasPrefix(l, "@@") {
			var oldStart, newStart int
			f := strings.Fields(l)
			oldStart, _ = strconv.Atoi(strings.Split(strings.TrimPrefix(f[1], "-"), ",")[0])
			_, _ = fmt.Sscan(strings.TrimPrefix(f[2], "+"), &newStart)
			if strings.HasSuffix(f[1], ",0") {
				oldStart++
			}
			for pos < oldStart-1 {
				out = append(out, a[pos])
				pos++
			}
			continue
		}
		noEOL := i+1 < len(lines) && strings.HasPrefix(lines[i+1], `\ No newline`)
		text := l[1:]
		if noEOL {
			text = strings.TrimSuffix(text, "\n")
		}
		switch l[0] {
		case ' ', '-':
			if pos >= len(a) || a[pos] != text {
				return "", fmt.Errorf("line %d: want %q, have %q", pos+1, text, at(a, pos))
			}
			if l[0] == ' ' {
				out = append(out, text)
			}
			pos++
		case '+':
			out = append(out, text)
		default:
			return "", fmt.Errorf("unexpected diff line %q", l)
		}
		if noEOL {
			i++
		}
	}
	out = append(out, a[pos:]...)
	return strings.Join(out, ""), nil
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<eof>"
}
