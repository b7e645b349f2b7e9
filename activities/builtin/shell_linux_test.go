package builtin

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The worker makes itself non-dumpable before it builds its tools; that
// must not cost the shell its containment (a uid map for the user
// namespace, for one, would need the /proc files it hides).
func TestShellContainmentInANonDumpableWorker(t *testing.T) {
	var available []containment
	for c := containCgroup; c < containProcessGroup; c++ {
		if probeJail(c) == nil {
			available = append(available, c)
		}
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)
	require.Zero(t, errno)
	t.Cleanup(func() { syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 1, 0) })

	ws, _ := newWorkspace(t)
	for _, c := range available {
		require.NoError(t, probeJail(c), c)
		run, err := execShell(t.Context(), ws, "echo ok", Options{}.withDefaults(), c)
		require.NoError(t, err, c)
		require.Equal(t, c, run.contained)
		require.Equal(t, "ok\n", run.output, c)
	}
}
