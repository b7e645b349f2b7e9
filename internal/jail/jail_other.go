//go:build !linux

package jail

import "fmt"

// New makes a jail of kind k. Cgroups and PID namespaces are Linux's;
// elsewhere a process group is all there is.
func New(k Kind, name string) (Jail, error) {
	if k != ProcessGroup {
		return nil, fmt.Errorf("jail: %s is only available on Linux", k)
	}
	return &pgroupJail{}, nil
}

func cleanupStale() {}
