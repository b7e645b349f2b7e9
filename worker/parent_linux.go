package main

import (
	"fmt"
	"os"
	"syscall"
)

// dieWithParent asks the kernel to kill this process when the process that
// started it dies. `make run` execs the worker, so a SIGKILL to make takes
// the embedded server down with it instead of leaving it holding port 7233,
// which is what a real crash of the whole dev process looks like.
func dieWithParent() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", errno)
	}
	// The parent may have died before the prctl took effect.
	if os.Getppid() == 1 {
		return fmt.Errorf("the parent process is already gone")
	}
	return nil
}
