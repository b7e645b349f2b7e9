//go:build !unix

package builtin

import (
	"os"
	"os/exec"
)

// Without process groups only bash itself can be killed.
type pgroupJail struct {
	cmd *exec.Cmd
}

func (j *pgroupJail) setup(cmd *exec.Cmd) (string, error) {
	j.cmd = cmd
	return "", nil
}

func (j *pgroupJail) kill() {
	if j.cmd != nil && j.cmd.Process != nil {
		_ = j.cmd.Process.Kill()
	}
}

func (j *pgroupJail) release() {}

func signalOf(state *os.ProcessState) string { return "unknown" }
