package builtin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestShellCleansUpAfterACrashedWorker(t *testing.T) {
	if err := probeJail(containCgroup); err != nil {
		t.Skipf("no writable cgroup v2 here: %v", err)
	}
	// A pid that belonged to a process which is gone, as a crashed
	// worker's is after a restart.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	parent, err := ownCgroupDir()
	require.NoError(t, err)
	dir := filepath.Join(parent, fmt.Sprintf("%s%d-1", cgroupPrefix, dead.Process.Pid))
	require.NoError(t, os.Mkdir(dir, 0o755))
	t.Cleanup(func() { removeCgroup(dir) })

	marker := fmt.Sprintf("tollgate-stale-%d", os.Getpid())
	t.Cleanup(func() { killMarked(marker) })
	fd, err := os.Open(dir)
	require.NoError(t, err)
	defer fd.Close()
	left := exec.Command("bash", "-c", "exec -a "+marker+" sleep 1000")
	left.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	require.NoError(t, left.Start())
	go func() { _ = left.Wait() }()
	require.Eventually(t, func() bool { return len(marked(marker)) == 1 }, 2*time.Second, 10*time.Millisecond)

	cleanupStaleJails()
	require.Empty(t, marked(marker))
	require.NoDirExists(t, dir)
}

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

func TestShellUnescapeMountinfo(t *testing.T) {
	require.Equal(t, "/sys/fs/cgroup", unescapeMountinfo("/sys/fs/cgroup"))
	require.Equal(t, "/mnt/my cgroup\\x", unescapeMountinfo(`/mnt/my\040cgroup\x`))
	require.Equal(t, `/a\04`, unescapeMountinfo(`/a\04`))
}
