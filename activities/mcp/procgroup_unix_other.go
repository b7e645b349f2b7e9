//go:build unix && !linux

package mcp

import "syscall"

// Elsewhere a server outlives a worker that dies unannounced until it
// notices its stdin closed, as MCP servers are expected to.
func dieWithWorker(*syscall.SysProcAttr) {}
