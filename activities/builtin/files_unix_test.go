//go:build unix

package builtin

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/tool"
)

func TestSpecialFilesRefused(t *testing.T) {
	ws, _ := newWorkspace(t)
	tools := testTools(t, Options{})
	call := tool.Call{Workspace: ws}
	// Reading a FIFO would block until someone writes to it.
	require.NoError(t, syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644))
	requireToolError(t, run(t, tools[ReadFile], call, readFileArgs{Path: "pipe"}), "pipe is not a regular file")
	requireToolError(t, run(t, tools[WriteFile], call, writeFileArgs{Path: "pipe", Content: "x"}), "pipe is not a regular file")
	requireToolError(t, run(t, tools[EditFile], call, editFileArgs{Path: "pipe", OldString: "a", NewString: "b"}), "pipe is not a regular file")
}

// TestFIFOSwappedInAfterCheck puts a FIFO where a checked regular file
// was: opening it must neither block (nobody will write to it) nor read
// it, and the type is judged on what was opened.
func TestFIFOSwappedInAfterCheck(t *testing.T) {
	ws, _ := newWorkspace(t)
	w, err := openFiles(tool.Call{Workspace: ws})
	require.NoError(t, err)
	defer w.close()
	tg, err := w.resolve("notes.txt")
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(ws, "notes.txt")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(ws, "notes.txt"), 0o644))

	_, err = readFile(tg, readFileArgs{}, Options{}.withDefaults())
	require.ErrorContains(t, err, "notes.txt is not a regular file")
	for _, maxRead := range []int64{0, maxPreviewFileBytes} {
		_, _, err = readForChange(tg, maxRead)
		require.ErrorContains(t, err, "notes.txt is not a regular file")
	}
}
