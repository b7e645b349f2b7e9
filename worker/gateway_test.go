package main

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate/gateway"
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
