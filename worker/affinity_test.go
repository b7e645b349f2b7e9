package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A default worker id is stable for one workspace (a restarted worker
// takes its pinned calls again), differs between workspaces on one host,
// is usable in a task queue name, and does not carry the workspace path.
func TestDefaultWorkerID(t *testing.T) {
	a := defaultWorkerID("/srv/tollgate/workspace-a")
	require.Equal(t, a, defaultWorkerID("/srv/tollgate/workspace-a"))
	require.NotEqual(t, a, defaultWorkerID("/srv/tollgate/workspace-b"))
	require.Regexp(t, validWorkerID, a)
	require.NotContains(t, a, "/", "no path in a queue name or in history")
}
