// Package datadir owns the layout of Tollgate's data directory: the worker
// keeps externally stored payloads (and large tool outputs), stored
// conversations and account connections in subdirectories of it, and the
// starter and the replayer read the same ones. Every user names the
// subdirectories through this package, so they cannot drift apart.
package datadir

import "path/filepath"

// Default is the data directory when TOLLGATE_DATA is unset.
const Default = ".tollgate"

// envVar is the environment variable that names the data directory.
const envVar = "TOLLGATE_DATA"

// FromEnv returns the directory TOLLGATE_DATA names, or Default. getenv is
// os.Getenv, or a stand-in in tests.
func FromEnv(getenv func(string) string) string {
	if d := getenv(envVar); d != "" {
		return d
	}
	return Default
}

// Payloads is the payload store in dir: Temporal payloads too large for
// history, and tool outputs too large for a card.
func Payloads(dir string) string { return filepath.Join(dir, "payloads") }

// Transcripts is the transcript store in dir: the conversations CallModel
// keeps so each model call sends only what is new.
func Transcripts(dir string) string { return filepath.Join(dir, "transcripts") }

// Connections is the connection store in dir: users' credentials for the
// providers tools connect to.
func Connections(dir string) string { return filepath.Join(dir, "connections") }

// OAuthRegistry is where the providers discovered for MCP servers are
// kept (MCP's authorization flow), so that the gateway sends a person to
// the provider a worker discovered.
func OAuthRegistry(dir string) string { return filepath.Join(dir, "oauth-registry") }
