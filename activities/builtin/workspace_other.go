//go:build !unix

package builtin

// openNoBlock is zero where opening a FIFO does not block.
const openNoBlock = 0
