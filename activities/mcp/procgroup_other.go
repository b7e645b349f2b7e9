//go:build !unix

package mcp

import "os/exec"

// Without process groups only the server itself can be killed.
func ownGroup(*exec.Cmd) {}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
