package mcp

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/tool"
)

func TestParseConfigReadsBothTransports(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"servers": {
	  "notes": {"command": "notes-mcp", "args": ["--file", "n.md"], "env": ["NOTES_*", "GOCACHE"], "dir": "work",
	            "timeout": "90s", "tools": {"append": {"approval": "always", "idempotent": false}, "*": {"disabled": true}}},
	  "tracker": {"url": "http://127.0.0.1:8931/mcp", "protocol_version": "2025-11-25", "max_result_bytes": 65536,
	              "headers": {"X-Team": "ops", "X-Key": {"file": "/run/secrets/key"}},
	              "discovery_headers": {"Authorization": {"env": "TRACKER_TOKEN", "prefix": "Bearer "}}}
	}}`))
	require.NoError(t, err)
	notes := cfg.Servers["notes"]
	require.Equal(t, "notes-mcp", notes.Command)
	require.Equal(t, 90*time.Second, notes.timeout())
	require.Equal(t, tool.ApprovalAlways, notes.Tools["append"].Approval)
	require.False(t, *notes.Tools["append"].Idempotent)
	tracker := cfg.Servers["tracker"]
	require.Equal(t, Secret{Value: "ops"}, tracker.Headers["X-Team"])
	require.Equal(t, Secret{File: "/run/secrets/key"}, tracker.Headers["X-Key"])
	require.Equal(t, Secret{Env: "TRACKER_TOKEN", Prefix: "Bearer "}, tracker.DiscoveryHeaders["Authorization"])
	require.Equal(t, DefaultTimeout, tracker.timeout())
	require.Equal(t, 65536, tracker.maxResultBytes())
}

func TestParseConfigRefusesWhatWouldBeUnsafeOrAmbiguous(t *testing.T) {
	for _, tt := range []struct{ name, cfg, want string }{
		{"empty", `{"servers": {}}`, "names no servers"},
		{"misspelt field", `{"servers": {"a": {"command": "x", "tools": {"t": {"aproval": "never"}}}}}`, `unknown field "aproval"`},
		{"two values", `{"servers": {"a": {"command": "x"}}} {}`, "more than one JSON value"},
		{"neither", `{"servers": {"a": {}}}`, `set "command"`},
		{"both", `{"servers": {"a": {"command": "x", "url": "http://h/"}}}`, "not both"},
		{"dotted name", `{"servers": {"a.b": {"command": "x"}}}`, "letters, digits"},
		{"long name", `{"servers": {"abcdefghijklmnopqrstuvwxyz0123456": {"command": "x"}}}`, "1-32"},
		{"env value", `{"servers": {"a": {"command": "x", "env": ["A=1"]}}}`, "variable name"},
		{"env glob", `{"servers": {"a": {"command": "x", "env": ["*"]}}}`, "variable name"},
		{"headers on stdio", `{"servers": {"a": {"command": "x", "headers": {"X": "y"}}}}`, `for "url" servers`},
		{"args on http", `{"servers": {"a": {"url": "http://h/", "args": ["-v"]}}}`, `for "command" servers`},
		{"scheme", `{"servers": {"a": {"url": "file:///etc/passwd"}}}`, "http:// or https://"},
		{"credentials in url", `{"servers": {"a": {"url": "https://u:p@h/"}}}`, "carries credentials"},
		{"reserved header", `{"servers": {"a": {"url": "http://h/", "headers": {"Mcp-Session-Id": "x"}}}}`, "belongs to the transport"},
		{"bad header name", `{"servers": {"a": {"url": "http://h/", "headers": {"X Y": "x"}}}}`, "not a valid header name"},
		{"two sources", `{"servers": {"a": {"url": "http://h/", "headers": {"X": {"env": "A", "file": "/f"}}}}}`, "exactly one"},
		{"no source", `{"servers": {"a": {"url": "http://h/", "headers": {"X": {"prefix": "Bearer "}}}}}`, "exactly one"},
		{"header injection", `{"servers": {"a": {"url": "http://h/", "headers": {"X": "a\r\nHost: evil"}}}}`, "line break"},
		{"approval", `{"servers": {"a": {"command": "x", "tools": {"t": {"approval": "sometimes"}}}}}`, "always or never"},
		{"short timeout", `{"servers": {"a": {"command": "x", "timeout": "10ms"}}}`, "between 1s"},
		{"bad duration", `{"servers": {"a": {"command": "x", "timeout": 5}}}`, "duration is a string"},
		{"protocol", `{"servers": {"a": {"command": "x", "protocol_version": "2023-01-01"}}}`, "not one of"},
		{"result bytes", `{"servers": {"a": {"command": "x", "max_result_bytes": 10}}}`, "max_result_bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.cfg))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestLoadConfigNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"servers": {"a": {"command": ""}}}`), 0o600))
	_, err := LoadConfig(path)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, `server "a"`)
	_, err = LoadConfig(filepath.Join(t.TempDir(), "missing.json"))
	require.Error(t, err)
}

func TestSecretsAreReadWhereTheConfigSays(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(file, []byte("from-file\n"), 0o600))
	env := map[string]string{"TOKEN": "from-env"}
	getenv := func(k string) string { return env[k] }

	v, err := Secret{Env: "TOKEN", Prefix: "Bearer "}.resolve(getenv)
	require.NoError(t, err)
	require.Equal(t, "Bearer from-env", v)
	v, err = Secret{File: file}.resolve(getenv)
	require.NoError(t, err)
	require.Equal(t, "from-file", v, "a trailing newline is not part of the secret")
	v, err = Secret{Value: "plain"}.resolve(getenv)
	require.NoError(t, err)
	require.Equal(t, "plain", v)

	_, err = Secret{Env: "MISSING"}.resolve(getenv)
	require.ErrorContains(t, err, "MISSING is empty or unset")
	env["BROKEN"] = "a\nb"
	_, err = Secret{Env: "BROKEN"}.resolve(getenv)
	require.ErrorContains(t, err, "line break")
	require.NotContains(t, err.Error(), "a\nb", "an error never shows the secret")
}

func TestRedactURLDropsTheQuery(t *testing.T) {
	require.Equal(t, "https://h.invalid/mcp", redactURL("https://h.invalid/mcp?key=secret#frag"))
}

// An "oauth" entry is for HTTP servers, names its client, and takes only
// the grants Tollgate runs; a private key may span lines, a secret not.
func TestOAuthEntriesAreChecked(t *testing.T) {
	for _, tt := range []struct{ name, oauth, want string }{
		{"stdio", ``, ""},
		{"no client", `{"client_secret": "s"}`, `needs a "client_id"`},
		{"grant", `{"client_id": "c", "grant": "password"}`, `grant "password"`},
		{"cc without a credential", `{"client_id": "c", "grant": "client_credentials"}`, `needs a "client_secret" or a "private_key"`},
		{"identity assertion without a token", `{"client_id": "c", "client_secret": "s", "grant": "identity_assertion", "idp_token_url": "https://idp.example/token"}`, `needs a "client_secret" and an "identity_token"`},
		{"identity assertion without the identity provider", `{"client_id": "c", "client_secret": "s", "grant": "identity_assertion", "identity_token": {"env": "ID_TOKEN"}}`, `needs "idp_token_url"`},
		{"secret with a line break", `{"client_id": "c", "client_secret": "a\nb"}`, "line break"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.oauth == "" {
				_, err := ParseConfig([]byte(`{"servers": {"a": {"command": "x", "oauth": {"client_id": "c"}}}}`))
				require.ErrorContains(t, err, `"oauth" are for "url" servers`)
				return
			}
			_, err := ParseConfig([]byte(`{"servers": {"a": {"url": "http://127.0.0.1:1/mcp", "oauth": ` + tt.oauth + `}}}`))
			require.ErrorContains(t, err, tt.want)
		})
	}
	cfg, err := ParseConfig([]byte(`{"servers": {"a": {"url": "http://127.0.0.1:1/mcp", "oauth": {"client_id": "c", "grant": "client_credentials",
	  "private_key": "-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n", "scopes": ["mcp:tools"]}}}}`))
	require.NoError(t, err)
	require.Equal(t, grantClientCredentials, cfg.Servers["a"].OAuth.Grant)
	key, err := cfg.Servers["a"].OAuth.PrivateKey.resolvePEM(func(string) string { return "" })
	require.NoError(t, err)
	require.Contains(t, key, "\nMIGH\n")
}
