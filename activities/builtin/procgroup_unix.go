//go:build unix

package builtin

import (
	"os"
	"syscall"
)

func signalOf(state *os.ProcessState) string {
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return "unknown"
}
