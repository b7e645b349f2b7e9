package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/gateway/apikey"
)

func runArgs(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func TestKeysAdd(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys.json")
	code, out, errOut := runArgs(t, nil, "keys", "add", "--principal", "ops", "--scopes", "read,respond", "--tools", "write_file, shell", "--file", file)
	require.Equal(t, 0, code, errOut)
	key := strings.TrimSpace(out)
	require.True(t, strings.HasPrefix(key, apikey.Prefix))
	require.Contains(t, errOut, "shown only now")

	set, err := apikey.Load(file, nil)
	require.NoError(t, err)
	e, ok := set.Lookup(key)
	require.True(t, ok)
	require.Equal(t, "ops", e.Principal)
	require.Equal(t, []apikey.Scope{apikey.Read, apikey.Respond}, e.Scopes)
	require.Equal(t, []string{"write_file", "shell"}, e.Tools)
	require.Empty(t, e.Users, "no --users: every user's turns")

	// --users limits the key to those users' turns.
	code, out, errOut = runArgs(t, nil, "keys", "add", "--principal", "ann-bot", "--scopes", "read", "--users", "ann, bob", "--file", file)
	require.Equal(t, 0, code, errOut)
	set, err = apikey.Load(file, nil)
	require.NoError(t, err)
	e, ok = set.Lookup(strings.TrimSpace(out))
	require.True(t, ok)
	require.Equal(t, []string{"ann", "bob"}, e.Users)
	require.True(t, e.Reaches("ann"))
	require.False(t, e.Reaches("carol"))

	// TOLLGATE_GATEWAY_KEYS names the file too.
	code, out, errOut = runArgs(t, map[string]string{"TOLLGATE_GATEWAY_KEYS": file}, "keys", "add", "--principal", "ci", "--scopes", "start")
	require.Equal(t, 0, code, errOut)
	require.NotEqual(t, key, strings.TrimSpace(out))

	for _, args := range [][]string{
		{"keys", "add", "--principal", "ops", "--file", file},
		{"keys", "add", "--scopes", "read", "--file", file},
		{"keys", "add", "--principal", "ops", "--scopes", "admin", "--file", file},
		{"keys", "add", "--principal", "o p s", "--scopes", "read", "--file", file},
		{"keys", "add", "--principal", "ops", "--scopes", "read", "--users", "ann\"", "--file", file},
		{"keys", "remove"},
	} {
		code, _, errOut = runArgs(t, nil, args...)
		require.NotEqual(t, 0, code, "%v", args)
		require.NotEmpty(t, errOut)
	}
}

func TestServeRefusesUnsafeStarts(t *testing.T) {
	code, _, errOut := runArgs(t, nil, "--dev", "--listen", "0.0.0.0:8080")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "only listens on loopback")

	code, _, errOut = runArgs(t, nil)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "no keys file")

	code, _, errOut = runArgs(t, nil, "--keys", filepath.Join(t.TempDir(), "none.json"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "open keys file")

	code, _, errOut = runArgs(t, nil, "--dev", "--tls-cert", "c.pem")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "go together")
}
