//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// ownGroup makes the server lead its own process group, so that killing
// the group at the end of a call also ends what the server started
// (a node or python child, a shell). A process that leaves the group
// (setsid) escapes; the worker cannot see it any more.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithWorker(cmd.SysProcAttr)
}

// killGroup kills the server's whole process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
