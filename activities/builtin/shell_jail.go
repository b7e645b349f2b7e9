package builtin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"
)

// containment is how the processes of one shell call are held together so
// that all of them can be killed when it ends. A process group is not
// enough on its own: `setsid -f`, `(setsid cmd &)` or `set -m` leave it,
// and the model is not trusted to leave nothing behind.
type containment int

// containmentOrder says which containment is preferred.
const (
	// containCgroup runs the call in a cgroup v2 of its own under the
	// worker's, emptied with cgroup.kill: nothing started inside can leave
	// it without write access to another cgroup's cgroup.procs. A
	// non-root worker can only create it where the worker's own cgroup is
	// delegated to its user, and then a command can write there too.
	containCgroup containment = iota
	// containPIDNamespace puts every process bash starts in a new PID
	// namespace; killing its init makes the kernel kill all the others.
	// Needs CAP_SYS_ADMIN, so a root worker without a writable cgroup.
	containPIDNamespace
	// containUserPIDNamespace is the same inside an unprivileged user
	// namespace, for a non-root worker where the kernel allows those.
	containUserPIDNamespace
	// containProcessGroup only kills bash's process group: a process that
	// detaches survives. The honest last resort.
	containProcessGroup
)

func (c containment) String() string {
	switch c {
	case containCgroup:
		return "cgroup"
	case containPIDNamespace:
		return "pid_namespace"
	case containUserPIDNamespace:
		return "user_pid_namespace"
	default:
		return "process_group"
	}
}

// escapeNote is added to every result of a call that ran with only a
// process group, so the model does not rely on the call having cleaned up.
const escapeNote = "note: this worker cannot contain detached processes (setsid, a new process group, a double fork); any the command started may still be running"

// jail holds the processes of one call.
type jail interface {
	// setup prepares cmd (before Start) and returns a script prefix bash
	// must run before the command.
	setup(cmd *exec.Cmd) (string, error)
	// kill kills every process in the jail. It may run more than once and
	// concurrently (from exec's Cancel and after Wait).
	kill()
	// release frees what setup took, after kill; processes may still be
	// exiting.
	release()
}

var probed struct {
	once sync.Once
	best containment
}

// bestContainment is the strongest containment that works for this
// process. It is found once, by starting bash under each in turn, because
// what the kernel permits (privileges, a writable cgroup, user namespaces,
// seccomp) is only known by trying.
func bestContainment() containment {
	probed.once.Do(func() {
		cleanupStaleJails()
		probed.best = containProcessGroup
		for _, c := range containmentOrder() {
			if c == containProcessGroup || probeJail(c) == nil {
				probed.best = c
				return
			}
		}
	})
	return probed.best
}

// containmentOrder lists the containments to try, best first, ending with
// containProcessGroup. For root the cgroup comes first: it holds bash
// too and changes nothing else, and root can leave any of them anyway.
// For another user a PID namespace comes first, because a cgroup it may
// create is one its commands may move themselves out of, while nothing
// unprivileged leaves a PID namespace.
func containmentOrder() []containment {
	if os.Geteuid() == 0 {
		return []containment{containCgroup, containPIDNamespace, containUserPIDNamespace, containProcessGroup}
	}
	return []containment{containPIDNamespace, containUserPIDNamespace, containCgroup, containProcessGroup}
}

// fallbacks is containmentOrder from c on.
func fallbacks(c containment) []containment {
	order := containmentOrder()
	if i := slices.Index(order, c); i >= 0 {
		return order[i:]
	}
	return []containment{c, containProcessGroup}
}

// probeJail runs an empty command under containment c.
func probeJail(c containment) error {
	j, err := newJail(c)
	if err != nil {
		return err
	}
	defer j.release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "")
	prefix, err := j.setup(cmd)
	if err != nil {
		return err
	}
	cmd.Args[2] = prefix + "exit 0"
	err = cmd.Run()
	j.kill()
	if err != nil {
		return fmt.Errorf("shell: %s: %w", c, err)
	}
	return nil
}

// containmentDescription says what the shell tool can promise about
// background processes under c; it goes into the tool's description.
func containmentDescription(c containment) string {
	switch c {
	case containProcessGroup:
		return "When the call ends its background processes are killed, but this worker cannot contain processes that detach " +
			"(setsid, a new process group, a double fork): those may keep running."
	case containUserPIDNamespace:
		return "When the call ends every process it started is killed, detached (setsid) ones included. " +
			"Commands run in a user namespace, so they see their user and files as nobody (65534)."
	default:
		return "When the call ends every process it started is killed, detached (setsid) ones included."
	}
}
