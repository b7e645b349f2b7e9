//go:build unix

package builtin

import (
	"os"
	"os/exec"
	"syscall"
)

// pgroupJail makes bash lead its own process group, so that a timeout or
// the end of the call kills everything it started that stayed in the
// group. A process that leaves the group (setsid, job control) escapes.
type pgroupJail struct {
	cmd *exec.Cmd
}

func (j *pgroupJail) setup(cmd *exec.Cmd) (string, error) {
	j.cmd = cmd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		j.kill()
		return nil
	}
	return "", nil
}

func (j *pgroupJail) kill() {
	if j.cmd != nil && j.cmd.Process != nil {
		_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (j *pgroupJail) release() {}

func signalOf(state *os.ProcessState) string {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return "unknown"
}
