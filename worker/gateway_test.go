package main

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
)

// The dev gateway is served with the standalone
// gateway's timeouts, so a slow or idle client cannot hold its
// connections open forever.
func TestDevGatewayHasTheStandaloneTimeouts(t *testing.T) {
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	defer c.Close()
	gw, err := startDevGateway("127.0.0.1:0", t.TempDir(), c, "tollgate", slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil, nil)
	require.NoError(t, err)
	defer gw.Stop()
	standalone, err := gateway.New(gateway.Options{Temporal: c, Addr: "127.0.0.1:0"})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	want := standalone.NewHTTPServer(ln)
	require.Equal(t, 30*time.Second, want.ReadTimeout, "the standalone gateway's, which this test holds the dev gateway to")
	require.Equal(t, want.ReadHeaderTimeout, gw.srv.ReadHeaderTimeout)
	require.Equal(t, want.ReadTimeout, gw.srv.ReadTimeout)
	require.Equal(t, want.WriteTimeout, gw.srv.WriteTimeout)
	require.Equal(t, want.IdleTimeout, gw.srv.IdleTimeout)
	require.Equal(t, want.MaxHeaderBytes, gw.srv.MaxHeaderBytes)
}

// A --dev-keys key is made once, readable by its owner only, and the
// same after a restart: each person keeps the key the banner printed.
func TestDevKeysAreOwnerOnlyAndKeptAcrossRestarts(t *testing.T) {
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	defer c.Close()
	data := t.TempDir()
	start := func() *devGateway {
		people, err := parseDevKeys("lena:leads,eve")
		require.NoError(t, err)
		gw, err := startDevGateway("127.0.0.1:0", data, c, "tollgate", slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil, nil, people...)
		require.NoError(t, err)
		gw.Stop()
		return gw
	}
	first := start()
	require.Len(t, first.people, 2)
	keys := map[string]bool{first.key: true}
	for _, p := range first.people {
		require.True(t, strings.HasPrefix(p.Key, apikey.Prefix), p.Key)
		require.False(t, keys[p.Key], "%s's key is another's", p.Principal)
		keys[p.Key] = true
		info, err := os.Stat(filepath.Join(data, "dev-gateway."+p.Principal+".key"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), p.Principal)
	}
	again := start()
	require.Equal(t, first.key, again.key)
	require.Equal(t, first.people, again.people)
}
