//go:build unix

package builtin

import "syscall"

// openNoBlock makes opening a FIFO return at once instead of waiting for
// a writer, so a FIFO swapped in after the type check is refused by the
// fstat that follows rather than hanging the call. Regular files and
// directories ignore it.
const openNoBlock = syscall.O_NONBLOCK
