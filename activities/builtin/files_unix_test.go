//go:build unix

package builtin

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities/tool"
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
