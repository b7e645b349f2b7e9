// Package jail holds the processes a tool starts together, so that all of
// them can be killed when the call (or the server) they belong to ends.
// The shell tool runs each command in one and MCP stdio servers each run
// in one: a process group alone is not enough, since `setsid -f`,
// `(setsid cmd &)` or `set -m` leave it, and neither the model nor a
// server is trusted to leave nothing behind.
package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"
)

// Kind is how a jail holds its processes.
type Kind int

// The kinds, strongest first for root (see Order).
const (
	// Cgroup runs the processes in a cgroup v2 of their own under the
	// worker's, emptied with cgroup.kill: nothing started inside can
	// leave it without write access to another cgroup's cgroup.procs. A
	// non-root worker can only create it where the worker's own cgroup is
	// delegated to its user, and then a process inside can write there
	// too.
	Cgroup Kind = iota
	// PIDNamespace puts every process the jailed one starts in a new PID
	// namespace; killing its init makes the kernel kill all the others.
	// Needs CAP_SYS_ADMIN, so a root worker without a writable cgroup.
	PIDNamespace
	// UserPIDNamespace is the same inside an unprivileged user
	// namespace, for a non-root worker where the kernel allows those.
	UserPIDNamespace
	// ProcessGroup only kills the process group: a process that detaches
	// survives. The honest last resort.
	ProcessGroup
)

func (k Kind) String() string {
	switch k {
	case Cgroup:
		return "cgroup"
	case PIDNamespace:
		return "pid_namespace"
	case UserPIDNamespace:
		return "user_pid_namespace"
	default:
		return "process_group"
	}
}

// Jail holds the processes of one command.
type Jail interface {
	// Setup prepares cmd (before Start), keeping what cmd.SysProcAttr
	// already asks for, and returns a script prefix bash must run before
	// anything else; Start and StartProgram put it in place.
	Setup(cmd *exec.Cmd) (string, error)
	// Kill kills every process in the jail. It may run more than once and
	// concurrently (from exec's Cancel and after Wait).
	Kill()
	// Release frees what Setup took, after Kill; processes may still be
	// exiting.
	Release()
}

var probed struct {
	once sync.Once
	best Kind
}

// Best is the strongest kind that works for this process. It is found
// once, by starting bash under each in turn, because what the kernel
// permits (privileges, a writable cgroup, user namespaces, seccomp) is
// only known by trying. The first call also kills what a crashed worker
// left in its jails.
func Best() Kind {
	probed.once.Do(func() {
		cleanupStale()
		probed.best = ProcessGroup
		for _, k := range Order() {
			if k == ProcessGroup || Probe(k) == nil {
				probed.best = k
				return
			}
		}
	})
	return probed.best
}

// Order lists the kinds to try, best first, ending with ProcessGroup.
// For root the cgroup comes first: it holds the jailed process too and
// changes nothing else, and root can leave any of them anyway. For
// another user a PID namespace comes first, because a cgroup it may
// create is one its processes may move themselves out of, while nothing
// unprivileged leaves a PID namespace.
func Order() []Kind {
	if os.Geteuid() == 0 {
		return []Kind{Cgroup, PIDNamespace, UserPIDNamespace, ProcessGroup}
	}
	return []Kind{PIDNamespace, UserPIDNamespace, Cgroup, ProcessGroup}
}

// Fallbacks is Order from k on.
func Fallbacks(k Kind) []Kind {
	order := Order()
	if i := slices.Index(order, k); i >= 0 {
		return order[i:]
	}
	return []Kind{k, ProcessGroup}
}

// Probe runs an empty bash script in a jail of kind k.
func Probe(k Kind) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd, j, _, err := Start([]Kind{k}, "probe", func() *exec.Cmd {
		return exec.CommandContext(ctx, "bash", "-c", "exit 0")
	})
	if err != nil {
		return err
	}
	defer j.Release()
	err = cmd.Wait()
	j.Kill()
	if err != nil {
		return fmt.Errorf("jail: %s: %w", k, err)
	}
	return nil
}

// Start starts a bash script in a jail, of the first kind in kinds that
// works; name labels the jail (its cgroup's name). build returns a new,
// unstarted `bash -c script [args...]` command each time it is called,
// since one that failed to start cannot be started again; the jail's
// prefix goes before its script. A kind that worked when probed can
// still fail for one command (a cgroup or namespace limit); the command
// has not run then, so the next kind is tried.
func Start(kinds []Kind, name string, build func() *exec.Cmd) (*exec.Cmd, Jail, Kind, error) {
	return start(kinds, name, func() (*exec.Cmd, error) {
		cmd := build()
		if len(cmd.Args) < 3 || cmd.Args[1] != "-c" {
			return nil, errors.New("jail: Start needs a bash -c command")
		}
		return cmd, nil
	}, func(cmd *exec.Cmd, prefix string) error {
		cmd.Args[2] = prefix + cmd.Args[2]
		return nil
	})
}

// StartProgram starts the program build returns (a new, unstarted command
// each call) in a jail, as Start does. Where the jail needs a prefix run
// first (a PID namespace), bash runs it and then the program as its child,
// with the program's arguments, directory, environment and standard
// streams, and exits with its status; killing the jail kills both.
func StartProgram(kinds []Kind, name string, build func() *exec.Cmd) (*exec.Cmd, Jail, Kind, error) {
	return start(kinds, name, func() (*exec.Cmd, error) { return build(), nil }, wrapProgram)
}

// wrapProgram makes cmd run its program through bash after prefix. The
// program cannot be exec'ed in bash's place: the process that unshared a
// PID namespace can no longer start threads (clone(2) refuses
// CLONE_THREAD across PID namespaces), and most servers (node, Go,
// python) use them.
func wrapProgram(cmd *exec.Cmd, prefix string) error {
	if prefix == "" {
		return nil
	}
	if cmd.Err != nil {
		return cmd.Err
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return fmt.Errorf("jail: this containment runs the program through bash: %w", err)
	}
	// $0 is the program's own argv[0]; "$@" its path and arguments. The
	// exit after it keeps bash from exec'ing the last command itself.
	args := append([]string{"bash", "-c", prefix + `(exec -a "$0" -- "$@")` + "\nexit $?\n", cmd.Args[0], cmd.Path}, cmd.Args[1:]...)
	cmd.Path, cmd.Args = bash, args
	return nil
}

func start(kinds []Kind, name string, build func() (*exec.Cmd, error), wrap func(*exec.Cmd, string) error) (*exec.Cmd, Jail, Kind, error) {
	var lastErr error
	for _, k := range kinds {
		j, err := New(k, name)
		if err != nil {
			lastErr = err
			continue
		}
		cmd, err := build()
		if err == nil {
			var prefix string
			if prefix, err = j.Setup(cmd); err == nil {
				if err = wrap(cmd, prefix); err == nil {
					if err = cmd.Start(); err == nil {
						return cmd, j, k, nil
					}
				}
			}
		}
		j.Release()
		lastErr = err
	}
	if lastErr == nil {
		lastErr = errors.New("no containment to try")
	}
	return nil, nil, 0, fmt.Errorf("jail: start: %w", lastErr)
}

// cancelWith makes a command started with exec.CommandContext kill the
// whole jail when its context ends; one made with exec.Command has no
// Cancel and must not be given one.
func cancelWith(cmd *exec.Cmd, j Jail) {
	if cmd.Cancel != nil {
		cmd.Cancel = func() error {
			j.Kill()
			return nil
		}
	}
}
