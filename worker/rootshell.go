package main

import (
	"log/slog"
	"slices"

	"github.com/tollgate-dev/tollgate/activities/builtin"
)

// allowRootShellEnv is --allow-root-shell's environment variable.
const allowRootShellEnv = "TOLLGATE_ALLOW_ROOT_SHELL"

// builtinsFor chooses the built-in tools (tollgate.Options.Builtins; nil
// is all of them) for a worker running as euid. A root worker's shell
// commands are root: they can read the worker's environment and memory
// through /proc however the worker protects itself, and leave any cgroup
// or namespace. So a root worker leaves the shell out unless the operator
// asks for it; every other tool still runs, and `make run` as root works
// without a flag.
func builtinsFor(euid int, allowRootShell bool, logger *slog.Logger) []string {
	if euid != 0 {
		return nil
	}
	if allowRootShell {
		logger.Warn("This worker runs as root and offers the shell tool because --allow-root-shell is set: shell commands run as root, " +
			"so they can read the worker's environment (model keys included) through /proc and leave any containment")
		return nil
	}
	logger.Warn("This worker runs as root, so it does not offer the shell tool: its commands could read the worker's environment " +
		"(model keys included) through /proc. Run the worker as an unprivileged user, or pass --allow-root-shell (" + allowRootShellEnv + "=1) to offer it anyway")
	return slices.DeleteFunc(builtin.Names(), func(n string) bool { return n == builtin.Shell })
}
