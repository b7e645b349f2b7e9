package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/storage/datadir"
)

func TestDisconnectForgetsTheConnection(t *testing.T) {
	dir := t.TempDir()
	store, err := connections.NewFileStore(datadir.Connections(dir))
	require.NoError(t, err)
	require.NoError(t, store.Put(context.Background(), connections.Credential{Provider: "github", User: "ada", Token: "s3cret-token"}))
	getenv := func(k string) string {
		if k == "USER" {
			return "ada"
		}
		return ""
	}
	var stdout, stderr bytes.Buffer
	c := newCLI(strings.NewReader(""), &stdout, &stderr, getenv)
	require.Equal(t, exitOK, c.run(context.Background(), []string{"--data", dir, "disconnect", "github"}), stderr.String())
	require.Contains(t, stdout.String(), "disconnected github for ada")
	require.NotContains(t, stdout.String()+stderr.String(), "s3cret-token")
	_, err = store.Get(context.Background(), "ada", "github")
	require.ErrorIs(t, err, connections.ErrNotConnected)

	stdout.Reset()
	c = newCLI(strings.NewReader(""), &stdout, &stderr, getenv)
	require.Equal(t, exitOK, c.run(context.Background(), []string{"--data", dir, "disconnect", "github"}), stderr.String())
	require.Contains(t, stdout.String(), "ada has no github connection")
}
