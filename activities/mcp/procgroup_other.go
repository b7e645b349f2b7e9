//go:build !linux

package mcp

import "os/exec"

// Elsewhere a server outlives a worker that dies unannounced until it
// notices its stdin closed, as MCP servers are expected to.
func dieWithWorker(*exec.Cmd) {}
