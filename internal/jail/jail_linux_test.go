package jail

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/proctest"
)

func TestJailCleansUpAfterACrashedWorker(t *testing.T) {
	if err := Probe(Cgroup); err != nil {
		t.Skipf("no writable cgroup v2 here: %v", err)
	}
	// A pid that belonged to a process which is gone, as a crashed
	// worker's is after a restart.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	parent, err := ownCgroupDir()
	require.NoError(t, err)
	dir := filepath.Join(parent, fmt.Sprintf("%sshell-%d-1", cgroupPrefix, dead.Process.Pid))
	require.NoError(t, os.Mkdir(dir, 0o755))
	t.Cleanup(func() { removeCgroup(dir) })

	marker := fmt.Sprintf("tollgate-stale-%d", os.Getpid())
	t.Cleanup(func() { proctest.KillMarked(marker) })
	fd, err := os.Open(dir)
	require.NoError(t, err)
	defer fd.Close()
	left := exec.Command("bash", "-c", "exec -a "+marker+" sleep 1000")
	left.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	require.NoError(t, left.Start())
	go func() { _ = left.Wait() }()
	require.Eventually(t, func() bool { return len(proctest.Marked(marker)) == 1 }, 2*time.Second, 10*time.Millisecond)

	cleanupStale()
	require.Empty(t, proctest.Marked(marker))
	require.NoDirExists(t, dir)
}

func TestUnescapeMountinfo(t *testing.T) {
	require.Equal(t, "/sys/fs/cgroup", unescapeMountinfo("/sys/fs/cgroup"))
	require.Equal(t, "/mnt/my cgroup\\x", unescapeMountinfo(`/mnt/my\040cgroup\x`))
	require.Equal(t, `/a\04`, unescapeMountinfo(`/a\04`))
}
