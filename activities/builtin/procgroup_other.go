//go:build !unix

package builtin

import (
	"os"
	"os/exec"
)

// Without process groups only bash itself can be killed.
func inNewProcessGroup(cmd *exec.Cmd) {}

func killProcessGroup(pid int) {}

func signalOf(state *os.ProcessState) string { return "unknown" }
