//go:build !linux

package builtin

import "fmt"

// Cgroups and PID namespaces are Linux's; elsewhere a process group is
// all there is, and the tool says so.
func newJail(c containment) (jail, error) {
	if c != containProcessGroup {
		return nil, fmt.Errorf("shell: %s is only available on Linux", c)
	}
	return &pgroupJail{}, nil
}

func cleanupStaleJails() {}
