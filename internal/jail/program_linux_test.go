package jail

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/proctest"
)

// A program (not a bash script) started in a jail keeps its arguments,
// standard streams and exit status, and what it detaches dies when the
// jail is killed, under every kind this machine allows.
func TestStartProgramHoldsWhatTheProgramDetaches(t *testing.T) {
	for k := Cgroup; k < ProcessGroup; k++ {
		t.Run(k.String(), func(t *testing.T) {
			if err := Probe(k); err != nil {
				t.Skipf("not available here: %v", err)
			}
			marker := fmt.Sprintf("tollgate-jail-program-%d-%s", os.Getpid(), k)
			t.Cleanup(func() { proctest.KillMarked(marker) })
			var out bytes.Buffer
			cmd, j, used, err := StartProgram([]Kind{k}, "test", func() *exec.Cmd {
				c := exec.Command("sh", "-c", `setsid -f bash -c 'exec -a "$0" sleep 300' "$1" </dev/null >/dev/null 2>&1; read -r line; echo "$0 got $line"; exit 3`, "prog", marker)
				c.Stdin = strings.NewReader("input\n")
				c.Stdout, c.Stderr = &out, &out
				return c
			})
			require.NoError(t, err)
			require.Equal(t, k, used)
			defer j.Release()
			err = cmd.Wait()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			require.Equal(t, 3, exit.ExitCode())
			require.Equal(t, "prog got input\n", out.String())
			require.Eventually(t, func() bool { return len(proctest.Marked(marker)) == 1 }, 5*time.Second, 10*time.Millisecond, "the detached child runs")
			j.Kill()
			require.Eventually(t, func() bool { return len(proctest.Marked(marker)) == 0 }, 5*time.Second, 10*time.Millisecond, "the detached child outlived the jail")
		})
	}
}
