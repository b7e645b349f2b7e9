package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// protectEnviron makes the worker non-dumpable. Its /proc/<pid> files
// (environ, mem, fd…) then belong to root, so a shell command running as
// the worker's user cannot read the model keys and other secrets in the
// worker's environment, nor attach to it with ptrace; core dumps, which
// would hold the same secrets, are off too. A root worker's commands are
// root and can still read everything: there the shell is not a boundary.
func protectEnviron() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
