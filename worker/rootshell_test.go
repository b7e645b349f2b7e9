package main

import (
	"bytes"
	"log/slog"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities/builtin"
)

// A root worker's shell commands are root: they read the worker's
// environment through /proc/<pid>/environ whatever the worker does to
// itself. Such a worker leaves the shell out, says so once at start and
// offers every other built-in tool, unless the operator asks for the
// shell by name.
func TestRootWorkerOffersShellOnlyWhenAllowed(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	names := builtinsFor(0, false, logger)
	require.NotNil(t, names, "nil would offer every built-in, the shell included")
	require.NotContains(t, names, builtin.Shell)
	require.Equal(t, slices.DeleteFunc(builtin.Names(), func(n string) bool { return n == builtin.Shell }), names)
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), "runs as root")
	require.Contains(t, logs.String(), "--allow-root-shell")
	require.Contains(t, logs.String(), allowRootShellEnv)

	logs.Reset()
	require.Nil(t, builtinsFor(0, true, logger), "the operator asked for it")
	require.Contains(t, logs.String(), "level=WARN", "still said once at start")
	require.Contains(t, logs.String(), "/proc")

	logs.Reset()
	require.Nil(t, builtinsFor(1000, false, logger), "another user gets every built-in")
	require.Empty(t, logs.String())
}
