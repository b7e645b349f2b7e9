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
	// Killed but not yet reaped: a zombie, which counts as dead.
	require.Eventually(t, func() bool { return len(Marked(marker)) == 0 }, 5*time.Second, 10*time.Millisecond)
	require.False(t, Alive(cmd.Process.Pid))
	_ = cmd.Wait()
	require.Empty(t, Listed(marker))
}
