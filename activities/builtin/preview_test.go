package builtin

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// preview calls a tool's Preview as the PreviewTool activity does, with
// arguments that pass the tool's schema.
func preview(t *testing.T, tl tool.Tool, call tool.Call, args any) ([]results.FileDiff, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	schema, err := tool.CompileSchema(tl.Spec().Schema)
	require.NoError(t, err)
	require.NoError(t, schema.Validate(raw), "arguments %s", raw)
	p, ok := tl.(tool.Previewer)
	require.True(t, ok, "%s cannot preview", tl.Spec().Name)
	call.Arguments = raw
	return p.Preview(context.Background(), call)
}

// requireWouldFail checks that err is the tool's sentence for a call that
// would fail, and returns it.
func requireWouldFail(t *testing.T, diffs []results.FileDiff, err error, contains string) string {
	t.Helper()
	require.Empty(t, diffs)
	msg, ok := tool.WouldFailMessage(err)
	require.True(t, ok, "want a would-fail sentence, got %v", err)
	require.Contains(t, msg, contains)
	return msg
}

// treeState records every entry under dir: kind, mode, size, mtime and
// content, so that a test can tell whether anything changed.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	state := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		info, err := os.Lstat(p)
		require.NoError(t, err)
		entry := info.Mode().String() + " " + info.ModTime().Format(time.RFC3339Nano)
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			entry += " -> " + target
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			entry += " " + string(data)
		}
		state[p] = entry
		return nil
	}))
	return state
}

func TestFileToolsPreview(t *testing.T) {
	tools := testTools(t, Options{})
	for name, tl := range tools {
		want := name == WriteFile || name == EditFile
		require.Equal(t, want, tool.Describe(tl).Previews, name)
		_, ok := tl.(tool.Previewer)
		require.Equal(t, want, ok, name)
	}
}

func TestWriteFilePreview(t *testing.T) {
	ws, _ := newWorkspace(t)
	tools := testTools(t, Options{})
	call := tool.Call{Workspace: ws}
	before := treeState(t, filepath.Dir(ws))

	t.Run("new file diffs against empty", func(t *testing.T) {
		diffs, err := preview(t, tools[WriteFile], call, writeFileArgs{Path: "new/dir/hello.txt", Content: "hello\nworld\n"})
		require.NoError(t, err)
		require.Equal(t, []results.FileDiff{{
			Path: "new/dir/hello.txt",
			Diff: "--- /dev/null\n+++ b/new/dir/hello.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n",
		}}, diffs)
	})
	t.Run("changed file", func(t *testing.T) {
		diffs, err := preview(t, tools[WriteFile], call, writeFileArgs{Path: "notes.txt", Content: "one\ntwo\nTHREE\nfour\nfive\n"})
		require.NoError(t, err)
		require.Equal(t, []results.FileDiff{{
			Path: "notes.txt",
			Diff: "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,5 +1,5 @@\n one\n two\n-three\n+THREE\n four\n five\n",
		}}, diffs)
	})
	t.Run("same content changes nothing", func(t *testing.T) {
		diffs, err := preview(t, tools[WriteFile], call, writeFileArgs{Path: "notes.txt", Content: "one\ntwo\nthree\nfour\nfive\n"})
		require.NoError(t, err)
		require.Empty(t, diffs)
	})
	t.Run("through a link inside names the file", func(t *testing.T) {
		diffs, err := preview(t, tools[WriteFile], call, writeFileArgs{Path: "link-in.txt", Content: "x\n"})
		require.NoError(t, err)
		require.Len(t, diffs, 1)
		require.Equal(t, "notes.txt", diffs[0].Path)
	})
	t.Run("relative to workdir", func(t *testing.T) {
		diffs, err := preview(t, tools[WriteFile], tool.Call{Workspace: ws, WorkDir: filepath.Join(ws, "sub")}, writeFileArgs{Path: "inner.txt", Content: "outer\n"})
		require.NoError(t, err)
		require.Equal(t, "--- a/sub/inner.txt\n+++ b/sub/inner.txt\n@@ -1 +1 @@\n-inner\n+outer\n", diffs[0].Diff)
	})
	t.Run("binary says so", func(t *testing.T) {
		diffs, err := preview(t, tools[WriteFile], call, writeFileArgs{Path: "blob.bin", Content: "a\x00b"})
		require.NoError(t, err)
		require.Equal(t, "Binary files /dev/null and b/blob.bin differ\n", diffs[0].Diff)
	})
	t.Run("refusals are the tool's own sentences", func(t *testing.T) {
		for _, tt := range []struct {
			args writeFileArgs
			want string
		}{
			{writeFileArgs{Path: "", Content: "x"}, "path is empty"},
			{writeFileArgs{Path: "sub", Content: "x"}, "sub is a directory"},
		} {
			diffs, err := preview(t, tools[WriteFile], call, tt.args)
			msg := requireWouldFail(t, diffs, err, tt.want)
			requireToolError(t, run(t, tools[WriteFile], call, tt.args), msg)
		}
	})
	t.Run("changes nothing", func(t *testing.T) {
		require.Equal(t, before, treeState(t, filepath.Dir(ws)))
	})
}

func TestEditFilePreview(t *testing.T) {
	ws, _ := newWorkspace(t)
	tools := testTools(t, Options{})
	call := tool.Call{Workspace: ws}
	require.NoError(t, os.WriteFile(filepath.Join(ws, "dup.txt"), []byte("x = 1\nx = 1\n"), 0o644))
	before := treeState(t, filepath.Dir(ws))

	edit := editFileArgs{Path: "notes.txt", OldString: "three\n", NewString: "THREE\n3.5\n"}
	diffs, err := preview(t, tools[EditFile], call, edit)
	require.NoError(t, err)
	require.Equal(t, []results.FileDiff{{
		Path: "notes.txt",
		Diff: "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,5 +1,6 @@\n one\n two\n-three\n+THREE\n+3.5\n four\n five\n",
	}}, diffs)

	// Every refusal of Run is foreseen, word for word.
	for _, tt := range []struct {
		name string
		args editFileArgs
		want string
	}{
		{"no match", editFileArgs{Path: "notes.txt", OldString: "six", NewString: "6"}, "old_string was not found in notes.txt; read the file and copy the text exactly"},
		{"twice", editFileArgs{Path: "dup.txt", OldString: "x = 1", NewString: "x = 2"}, "occurs 2 times in dup.txt"},
		{"missing file", editFileArgs{Path: "nope.txt", OldString: "a", NewString: "b"}, "nope.txt does not exist"},
		{"empty old", editFileArgs{Path: "notes.txt", OldString: "", NewString: "b"}, "old_string is empty"},
		{"no change", editFileArgs{Path: "notes.txt", OldString: "two", NewString: "two"}, "the same"},
		{"directory", editFileArgs{Path: "sub", OldString: "a", NewString: "b"}, "sub is a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			diffs, err := preview(t, tools[EditFile], call, tt.args)
			msg := requireWouldFail(t, diffs, err, tt.want)
			out := run(t, tools[EditFile], call, tt.args)
			requireToolError(t, out)
			require.Equal(t, out.ToolError.Message, msg)
		})
	}
	require.Equal(t, before, treeState(t, filepath.Dir(ws)), "previews change nothing; the refused runs neither")

	// The preview is the diff the run then reports.
	out := run(t, tools[EditFile], call, edit)
	require.Equal(t, diffs, out.Success.Diffs)
}

func TestPreviewPathConfinement(t *testing.T) {
	ws, outside := newWorkspace(t)
	tools := testTools(t, Options{})
	before := treeState(t, filepath.Dir(ws))
	for _, tt := range []struct {
		name, workDir, path, want string
	}{
		{"dotdot", "", "../outside/secret.txt", "outside the workspace"},
		{"dotdot deep", "", "sub/../../outside/secret.txt", "outside the workspace"},
		{"dotdot from workdir", "sub", "../../outside/secret.txt", "outside the workspace"},
		{"absolute outside", "", filepath.Join(outside, "secret.txt"), "outside the workspace"},
		{"symlink file out", "", "link-out.txt", "symbolic link"},
		{"symlink file out from workdir", "sub", "../link-out.txt", "symbolic link"},
		{"symlink dir out", "", "dir-out/secret.txt", "symbolic link"},
		{"dangling symlink out", "", "dangling-out.txt", "cannot be resolved"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			call := tool.Call{Workspace: ws}
			if tt.workDir != "" {
				call.WorkDir = filepath.Join(ws, tt.workDir)
			}
			diffs, err := preview(t, tools[WriteFile], call, writeFileArgs{Path: tt.path, Content: "pwned\n"})
			msg := requireWouldFail(t, diffs, err, tt.want)
			require.NotContains(t, msg, "top secret")
			if !filepath.IsAbs(tt.path) {
				require.NotContains(t, msg, filepath.Dir(ws), "the sentence names no host path the call did not")
			}
			// An edit that would match the secret: a preview that read it
			// would show it in the diff.
			diffs, err = preview(t, tools[EditFile], call, editFileArgs{Path: tt.path, OldString: "top secret", NewString: "x"})
			requireWouldFail(t, diffs, err, tt.want)
		})
	}
	require.Equal(t, before, treeState(t, filepath.Dir(ws)))
}

func TestPreviewBoundsHugeFiles(t *testing.T) {
	ws, _ := newWorkspace(t)
	tools := testTools(t, Options{})
	call := tool.Call{Workspace: ws}
	huge := strings.Repeat("0123456789abcdef\n", maxPreviewFileBytes/17+1) // just over 1 MiB
	require.Greater(t, len(huge), maxPreviewFileBytes)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "huge.txt"), []byte(huge), 0o644))

	notShown := "huge.txt is " + strconv.Itoa(len(huge)) + " bytes, more than the 1048576 bytes a preview diffs; the change is not shown\n"
	diffs, err := preview(t, tools[WriteFile], call, writeFileArgs{Path: "huge.txt", Content: "small\n"})
	require.NoError(t, err)
	require.Equal(t, []results.FileDiff{{Path: "huge.txt", Diff: notShown}}, diffs)

	diffs, err = preview(t, tools[EditFile], call, editFileArgs{Path: "huge.txt", OldString: "0123", NewString: "x"})
	require.NoError(t, err)
	require.Equal(t, []results.FileDiff{{Path: "huge.txt", Diff: notShown}}, diffs)

	// New content over the bound is not diffed either.
	diffs, err = preview(t, tools[WriteFile], call, writeFileArgs{Path: "new.txt", Content: huge})
	require.NoError(t, err)
	require.Equal(t, []results.FileDiff{{Path: "new.txt", Diff: strings.Replace(notShown, "huge.txt", "new.txt", 1)}}, diffs)

	// Under the file bound, a long diff is still cut to the card's bound.
	big := strings.Repeat("line of text\n", 60_000) // 780,000 bytes
	start := time.Now()
	diffs, err = preview(t, tools[WriteFile], call, writeFileArgs{Path: "big.txt", Content: big})
	require.NoError(t, err)
	t.Logf("previewing a new %d-byte file took %s", len(big), time.Since(start))
	require.Greater(t, len(diffs[0].Diff), results.MaxPreviewBytes, "the tool returns the whole diff")
	bounded := results.BoundPreview(diffs)
	require.LessOrEqual(t, len(bounded[0].Path)+len(bounded[0].Diff), results.MaxPreviewBytes)
	require.True(t, strings.HasSuffix(bounded[0].Diff, results.TruncatedMarker))
}

func TestPreviewMissingWorkspaceIsInternal(t *testing.T) {
	tools := testTools(t, Options{})
	_, err := preview(t, tools[WriteFile], tool.Call{}, writeFileArgs{Path: "x", Content: "y"})
	require.ErrorContains(t, err, "no workspace")
	_, isSentence := tool.WouldFailMessage(err)
	require.False(t, isSentence, "the host's fault is not the call's")
}

func TestPreviewInvalidArguments(t *testing.T) {
	tools := testTools(t, Options{})
	p := tools[EditFile].(tool.Previewer)
	_, err := p.Preview(context.Background(), tool.Call{Workspace: t.TempDir(), Arguments: json.RawMessage(`{"path":7}`)})
	msg, ok := tool.WouldFailMessage(err)
	require.True(t, ok)
	require.Contains(t, msg, "invalid arguments")
}
