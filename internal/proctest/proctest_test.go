//go:build linux

package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A process is found by its renamed argv[0], counts as dead once it is a
// zombie nobody has reaped, and KillMarked ends it.
func TestMarkedFindsKillsAndBuriesAProcess(t *testing.T) {
	marker := fmt.Sprintf("tollgate-proctest-%d", os.Getpid())
	t.Cleanup(func() { KillMarked(marker) })
	cmd := exec.Command("bash", "-c", `exec -a "$0" sleep 300`, marker)
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return len(Marked(marker)) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, []int{cmd.Process.Pid}, Marked(marker))

	KillMarked(marker)
	// Killed but not yet reaped: a zombie, which counts as dead. The
	// kernel drops a dying process's argv before it turns zombie, so the
	// marker can be gone while the process is still exiting: wait for
	// both.
	require.Eventually(t, func() bool { return len(Marked(marker)) == 0 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return !Alive(cmd.Process.Pid) }, 5*time.Second, 10*time.Millisecond)
	_ = cmd.Wait()
	require.Empty(t, Listed(marker))
}
