//go:build unix

package jail

import (
	"os/exec"
	"syscall"
)

// pgroupJail makes the command lead its own process group, so that a
// timeout or the end of the call kills everything it started that stayed
// in the group. A process that leaves the group (setsid, job control)
// escapes.
type pgroupJail struct {
	cmd *exec.Cmd
}

func (j *pgroupJail) Setup(cmd *exec.Cmd) (string, error) {
	j.cmd = cmd
	sysProcAttr(cmd)
	cancelWith(cmd, j)
	return "", nil
}

func (j *pgroupJail) Kill() {
	if j.cmd != nil && j.cmd.Process != nil {
		_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (j *pgroupJail) Release() {}

// sysProcAttr is cmd's, made to lead a process group of its own; what
// the caller set there (Pdeathsig, say) is kept.
func sysProcAttr(cmd *exec.Cmd) *syscall.SysProcAttr {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	return cmd.SysProcAttr
}
