package builtin

import "github.com/tollgate-dev/tollgate/internal/jail"

// containment is how the processes of one shell call are held together
// (see package jail, which MCP stdio servers share).
type containment = jail.Kind

const (
	containCgroup           = jail.Cgroup
	containPIDNamespace     = jail.PIDNamespace
	containUserPIDNamespace = jail.UserPIDNamespace
	containProcessGroup     = jail.ProcessGroup
)

var (
	bestContainment = jail.Best
	probeJail       = jail.Probe
)

// escapeNote is added to every result of a call that ran with only a
// process group, so the model does not rely on the call having cleaned up.
const escapeNote = "note: this worker cannot contain detached processes (setsid, a new process group, a double fork); any the command started may still be running"

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
