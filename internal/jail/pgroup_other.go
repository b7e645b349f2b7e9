//go:build !unix

package jail

import "os/exec"

// Without process groups only the command itself can be killed.
type pgroupJail struct {
	cmd *exec.Cmd
}

func (j *pgroupJail) Setup(cmd *exec.Cmd) (string, error) {
	j.cmd = cmd
	cancelWith(cmd, j)
	return "", nil
}

func (j *pgroupJail) Kill() {
	if j.cmd != nil && j.cmd.Process != nil {
		_ = j.cmd.Process.Kill()
	}
}

func (j *pgroupJail) Release() {}
