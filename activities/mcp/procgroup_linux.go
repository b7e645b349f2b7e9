//go:build linux

package mcp

import (
	"os/exec"
	"syscall"
)

// dieWithWorker has the kernel kill the server if the worker dies without
// stopping it (SIGKILL, a crash): an orphaned server would otherwise keep
// running with whatever it holds open. What it started is in its jail,
// which the next worker to start empties.
func dieWithWorker(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
