//go:build !unix

package builtin

import "os"

func signalOf(state *os.ProcessState) string { return "unknown" }
