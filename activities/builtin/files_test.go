package builtin

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

func TestPathConfinement(t *testing.T) {
	ws, outside := newWorkspace(t)
	tools := testTools(t, Options{})
	escapes := []struct {
		name, path, want string
	}{
		{"dotdot", "../outside/secret.txt", "outside the workspace"},
		{"dotdot deep", "sub/../../outside/secret.txt", "outside the workspace"},
		{"absolute outside", filepath.Join(outside, "secret.txt"), "outside the workspace"},
		{"etc passwd", "/etc/passwd", "outside the workspace"},
		{"symlink file out", "link-out.txt", "symbolic link"},
		{"symlink dir out", "dir-out/secret.txt", "symbolic link"},
		{"dangling symlink out", "dangling-out.txt", "cannot be resolved"},
	}
	for _, tt := range escapes {
		t.Run(tt.name, func(t *testing.T) {
			call := tool.Call{Workspace: ws}
			requireToolError(t, run(t, tools[ReadFile], call, readFileArgs{Path: tt.path}), tt.want, tt.path)
			requireToolError(t, run(t, tools[ListDir], call, listDirArgs{Path: tt.path}), tt.want)
			requireToolError(t, run(t, tools[WriteFile], call, writeFileArgs{Path: tt.path, Content: "pwned"}), tt.want)
			requireToolError(t, run(t, tools[EditFile], call, editFileArgs{Path: tt.path, OldString: "top", NewString: "pwned"}), tt.want)
		})
	}
	data, err := os.ReadFile(filepath.Join(outside, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, "top secret\n", string(data))
	_, err = os.Stat(filepath.Join(outside, "nothing-yet.txt"))
	require.True(t, os.IsNotExist(err), "writing through a dangling link must not create its target")

	t.Run("inside paths", func(t *testing.T) {
		for _, p := range []string{"notes.txt", "./notes.txt", "sub/../notes.txt", filepath.Join(ws, "notes.txt"), "link-in.txt"} {
			out := run(t, tools[ReadFile], tool.Call{Workspace: ws}, readFileArgs{Path: p})
			require.Equal(t, "one\ntwo\nthree\nfour\nfive\n", requireText(t, out), p)
		}
	})
	t.Run("absolute link back inside", func(t *testing.T) {
		// os.Root alone refuses absolute links; resolve turns one that
		// points inside into a plain name, so such links keep working.
		require.NoError(t, os.Symlink(filepath.Join(ws, "sub"), filepath.Join(ws, "abs-in")))
		t.Cleanup(func() { _ = os.Remove(filepath.Join(ws, "abs-in")) })
		call := tool.Call{Workspace: ws}
		require.Equal(t, "inner\n", requireText(t, run(t, tools[ReadFile], call, readFileArgs{Path: "abs-in/inner.txt"})))
		require.Equal(t, "inner.txt", requireText(t, run(t, tools[ListDir], call, listDirArgs{Path: "abs-in"})))
	})
	t.Run("workspace behind a symlink", func(t *testing.T) {
		alias := filepath.Join(t.TempDir(), "alias")
		require.NoError(t, os.Symlink(ws, alias))
		out := run(t, tools[ReadFile], tool.Call{Workspace: alias}, readFileArgs{Path: filepath.Join(alias, "sub", "inner.txt")})
		require.Equal(t, "inner\n", requireText(t, out))
	})
	t.Run("workdir", func(t *testing.T) {
		call := tool.Call{Workspace: ws, WorkDir: filepath.Join(ws, "sub")}
		require.Equal(t, "inner\n", requireText(t, run(t, tools[ReadFile], call, readFileArgs{Path: "inner.txt"})))
		require.Contains(t, requireText(t, run(t, tools[ReadFile], call, readFileArgs{Path: "../notes.txt"})), "one")
		requireToolError(t, run(t, tools[ReadFile], call, readFileArgs{Path: "../../outside/secret.txt"}), "outside the workspace")
	})
	t.Run("workdir outside", func(t *testing.T) {
		call := tool.Call{Workspace: ws, WorkDir: outside}
		requireToolError(t, run(t, tools[ReadFile], call, readFileArgs{Path: "secret.txt"}), "outside the workspace")
	})
}

func TestReadFile(t *testing.T) {
	ws, _ := newWorkspace(t)
	var pngData bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	require.NoError(t, png.Encode(&pngData, img))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "pic.dat"), pngData.Bytes(), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "blob.bin"), []byte{0x7f, 'E', 'L', 'F', 0, 0, 1}, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "empty.txt"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "noeol.txt"), []byte("a\nb"), 0o644))
	tools := testTools(t, Options{MaxReadBytes: 64})
	call := tool.Call{Workspace: ws}

	tests := []struct {
		name     string
		args     readFileArgs
		want     string
		wantErr  string
		wantPart results.Part
	}{
		{name: "whole", args: readFileArgs{Path: "notes.txt"}, want: "one\ntwo\nthree\nfour\nfive\n"},
		{name: "offset", args: readFileArgs{Path: "notes.txt", Offset: 4}, want: "four\nfive\n"},
		{name: "offset and limit", args: readFileArgs{Path: "notes.txt", Offset: 2, Limit: 2}, want: "two\nthree\n\n[more lines follow; continue with offset=4]"},
		{name: "limit exact", args: readFileArgs{Path: "notes.txt", Offset: 4, Limit: 2}, want: "four\nfive\n"},
		{name: "no newline at end", args: readFileArgs{Path: "noeol.txt"}, want: "a\nb"},
		{name: "past end", args: readFileArgs{Path: "notes.txt", Offset: 9}, wantErr: "offset 9 is past the end"},
		{name: "not found", args: readFileArgs{Path: "missing.txt"}, wantErr: "missing.txt does not exist"},
		{name: "directory", args: readFileArgs{Path: "sub"}, wantErr: "sub is a directory"},
		{name: "binary", args: readFileArgs{Path: "blob.bin"}, wantErr: "binary file"},
		{name: "empty", args: readFileArgs{Path: "empty.txt"}, want: "(empty.txt is empty)"},
		{name: "image", args: readFileArgs{Path: "pic.dat"}, want: "pic.dat (image/png, ", wantPart: results.MediaPart("image/png", pngData.Bytes())},
		{name: "negative", args: readFileArgs{Path: "notes.txt", Offset: -1}, wantErr: "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := run(t, tools[ReadFile], call, tt.args)
			if tt.wantErr != "" {
				requireToolError(t, out, tt.wantErr)
				return
			}
			if tt.wantPart.Type != "" {
				require.Contains(t, requireText(t, out), tt.want)
				require.Equal(t, tt.wantPart, out.Success.Parts[1])
				return
			}
			require.Equal(t, tt.want, requireText(t, out))
		})
	}

	t.Run("byte cap", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(ws, "long.txt"), []byte(strings.Repeat("0123456789\n", 20)), 0o644))
		text := requireText(t, run(t, tools[ReadFile], call, readFileArgs{Path: "long.txt"}))
		require.Contains(t, text, "[stopped after 55 bytes; continue with offset=6]")
	})
}

func TestListDir(t *testing.T) {
	ws, _ := newWorkspace(t)
	require.NoError(t, os.Mkdir(filepath.Join(ws, "empty"), 0o755))
	tools := testTools(t, Options{})
	call := tool.Call{Workspace: ws}

	text := requireText(t, run(t, tools[ListDir], call, listDirArgs{}))
	require.Equal(t, "dangling-out.txt\ndir-out\nempty/\nlink-in.txt\nlink-out.txt\nnotes.txt\nsub/", text)
	require.Equal(t, "inner.txt", requireText(t, run(t, tools[ListDir], call, listDirArgs{Path: "sub"})))
	require.Equal(t, "inner.txt", requireText(t, run(t, tools[ListDir], tool.Call{Workspace: ws, WorkDir: filepath.Join(ws, "sub")}, listDirArgs{})))
	require.Equal(t, "(empty is empty)", requireText(t, run(t, tools[ListDir], call, listDirArgs{Path: "empty"})))
	requireToolError(t, run(t, tools[ListDir], call, listDirArgs{Path: "nope"}), "nope does not exist")
	requireToolError(t, run(t, tools[ListDir], call, listDirArgs{Path: "notes.txt"}), "not a directory")
	requireToolError(t, run(t, tools[ListDir], call, listDirArgs{Path: ".."}), "outside the workspace")
}

func TestWriteFile(t *testing.T) {
	ws, _ := newWorkspace(t)
	tools := testTools(t, Options{})
	call := tool.Call{Workspace: ws}

	t.Run("create with parents", func(t *testing.T) {
		out := run(t, tools[WriteFile], call, writeFileArgs{Path: "new/dir/hello.txt", Content: "hello\nworld\n"})
		require.Equal(t, "created new/dir/hello.txt (12 bytes)", requireText(t, out))
		require.Equal(t, []results.FileDiff{{
			Path: "new/dir/hello.txt",
			Diff: "--- /dev/null\n+++ b/new/dir/hello.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n",
		}}, out.Success.Diffs)
		data, err := os.ReadFile(filepath.Join(ws, "new", "dir", "hello.txt"))
		require.NoError(t, err)
		require.Equal(t, "hello\nworld\n", string(data))
	})
	t.Run("overwrite keeps mode", func(t *testing.T) {
		p := filepath.Join(ws, "run.sh")
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\necho hi\n"), 0o750))
		out := run(t, tools[WriteFile], call, writeFileArgs{Path: "run.sh", Content: "#!/bin/sh\necho bye\n"})
		require.Equal(t, "updated run.sh (19 bytes)", requireText(t, out))
		require.Equal(t, "--- a/run.sh\n+++ b/run.sh\n@@ -1,2 +1,2 @@\n #!/bin/sh\n-echo hi\n+echo bye\n", out.Success.Diffs[0].Diff)
		info, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o750), info.Mode().Perm())
	})
	t.Run("same content is a no-op", func(t *testing.T) {
		out := run(t, tools[WriteFile], call, writeFileArgs{Path: "notes.txt", Content: "one\ntwo\nthree\nfour\nfive\n"})
		require.Contains(t, requireText(t, out), "nothing changed")
		require.Empty(t, out.Success.Diffs)
	})
	t.Run("relative to workdir", func(t *testing.T) {
		run(t, tools[WriteFile], tool.Call{Workspace: ws, WorkDir: filepath.Join(ws, "sub")}, writeFileArgs{Path: "x.txt", Content: "x"})
		_, err := os.Stat(filepath.Join(ws, "sub", "x.txt"))
		require.NoError(t, err)
	})
	t.Run("onto a directory", func(t *testing.T) {
		requireToolError(t, run(t, tools[WriteFile], call, writeFileArgs{Path: "sub", Content: "x"}), "sub is a directory")
	})
	t.Run("under a file", func(t *testing.T) {
		requireToolError(t, run(t, tools[WriteFile], call, writeFileArgs{Path: "notes.txt/x", Content: "x"}), "not a directory")
	})
	t.Run("through a link inside", func(t *testing.T) {
		out := run(t, tools[WriteFile], call, writeFileArgs{Path: "link-in.txt", Content: "via link\n"})
		require.Equal(t, "updated notes.txt (9 bytes)", requireText(t, out))
		target, err := os.Readlink(filepath.Join(ws, "link-in.txt"))
		require.NoError(t, err)
		require.Equal(t, "notes.txt", target, "the link stays a link")
		data, err := os.ReadFile(filepath.Join(ws, "notes.txt"))
		require.NoError(t, err)
		require.Equal(t, "via link\n", string(data))
	})
	t.Run("no temp files left", func(t *testing.T) {
		for _, dir := range []string{ws, filepath.Join(ws, "sub"), filepath.Join(ws, "new", "dir")} {
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range entries {
				require.NotContains(t, e.Name(), ".tmp-", e.Name())
			}
		}
	})
}

func TestEditFile(t *testing.T) {
	ws, _ := newWorkspace(t)
	tools := testTools(t, Options{})
	call := tool.Call{Workspace: ws}
	require.NoError(t, os.WriteFile(filepath.Join(ws, "dup.txt"), []byte("x = 1\nx = 1\n"), 0o644))

	tests := []struct {
		name    string
		args    editFileArgs
		wantErr string
	}{
		{"not found", editFileArgs{Path: "notes.txt", OldString: "six", NewString: "6"}, "old_string was not found in notes.txt"},
		{"whitespace matters", editFileArgs{Path: "notes.txt", OldString: "two \n", NewString: "2\n"}, "not found"},
		{"twice", editFileArgs{Path: "dup.txt", OldString: "x = 1", NewString: "x = 2"}, "occurs 2 times in dup.txt"},
		{"missing file", editFileArgs{Path: "nope.txt", OldString: "a", NewString: "b"}, "nope.txt does not exist"},
		{"empty old", editFileArgs{Path: "notes.txt", OldString: "", NewString: "b"}, "old_string is empty"},
		{"no change", editFileArgs{Path: "notes.txt", OldString: "two", NewString: "two"}, "the same"},
		{"directory", editFileArgs{Path: "sub", OldString: "a", NewString: "b"}, "sub is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requireToolError(t, run(t, tools[EditFile], call, tt.args), tt.wantErr)
		})
	}

	t.Run("replaces once with diff", func(t *testing.T) {
		out := run(t, tools[EditFile], call, editFileArgs{Path: "notes.txt", OldString: "three\n", NewString: "THREE\n3.5\n"})
		require.Equal(t, "edited notes.txt", requireText(t, out))
		require.Equal(t, []results.FileDiff{{
			Path: "notes.txt",
			Diff: "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,5 +1,6 @@\n one\n two\n-three\n+THREE\n+3.5\n four\n five\n",
		}}, out.Success.Diffs)
		data, err := os.ReadFile(filepath.Join(ws, "notes.txt"))
		require.NoError(t, err)
		require.Equal(t, "one\ntwo\nTHREE\n3.5\nfour\nfive\n", string(data))

		// Run again, as after a lost result: it no longer matches.
		requireToolError(t, run(t, tools[EditFile], call, editFileArgs{Path: "notes.txt", OldString: "three\n", NewString: "THREE\n3.5\n"}), "not found")
	})
}
