//go:build linux

package mcp

import "syscall"

// dieWithWorker has the kernel kill the server if the worker dies without
// stopping it (SIGKILL, a crash): an orphaned server would otherwise keep
// running with whatever it holds open.
func dieWithWorker(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
