package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
	"github.com/tollgate-dev/tollgate/storage/codec"
	"github.com/tollgate-dev/tollgate/storage/datadir"
)

// Turning sealing on makes the store refuse the plain files it already
// holds; `starter connections migrate` is the explicit step that seals them.
func TestConnectionsMigrateSealsPlainFiles(t *testing.T) {
	dir := t.TempDir()
	plain, err := connections.NewFileStore(datadir.Connections(dir))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, plain.Put(ctx, connections.Credential{Provider: "github", User: "ada", Token: "s3cret-token"}))

	key, err := codec.NewKey("k1")
	require.NoError(t, err)
	keysFile := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keysFile, []byte(key.Line()+"\n"), 0o600))
	getenv := func(k string) string {
		if k == codec.EnvKeysFile {
			return keysFile
		}
		return ""
	}
	sealed, err := clientconfig.Connections(dir, getenv)
	require.NoError(t, err)
	_, err = sealed.Get(ctx, "ada", "github")
	require.ErrorIs(t, err, connections.ErrUnsealed)

	var stdout, stderr bytes.Buffer
	c := newCLI(strings.NewReader(""), &stdout, &stderr, getenv)
	require.Equal(t, exitOK, c.run(ctx, []string{"--data", dir, "connections", "migrate"}), stderr.String())
	require.Contains(t, stdout.String(), "sealed ada/github")
	require.NotContains(t, stdout.String()+stderr.String(), "s3cret-token")
	raw, err := os.ReadFile(filepath.Join(datadir.Connections(dir), "ada", "github.json"))
	require.NoError(t, err)
	require.NotContains(t, string(raw), "s3cret-token")
	cred, err := sealed.Get(ctx, "ada", "github")
	require.NoError(t, err)
	require.Equal(t, "s3cret-token", cred.Token)

	stdout.Reset()
	c = newCLI(strings.NewReader(""), &stdout, &stderr, getenv)
	require.Equal(t, exitOK, c.run(ctx, []string{"--data", dir, "connections", "migrate"}), stderr.String())
	require.Contains(t, stdout.String(), "no plain credential files")

	// Without keys there is nothing to seal with: a usage error, not a no-op.
	stderr.Reset()
	c = newCLI(strings.NewReader(""), &stdout, &stderr, func(string) string { return "" })
	require.Equal(t, exitRejected, c.run(ctx, []string{"--data", dir, "connections", "migrate"}))
	require.Contains(t, stderr.String(), codec.EnvKeysFile)

	stderr.Reset()
	c = newCLI(strings.NewReader(""), &stdout, &stderr, getenv)
	require.Equal(t, exitRejected, c.run(ctx, []string{"--data", dir, "connections"}))
	require.Contains(t, stderr.String(), "migrate")
}
