package deploy_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/stream"
)

// The nats service is the server the tests run, and the worker and the
// gateway find it.
func TestComposeNATS(t *testing.T) {
	c, vars, _ := load(t)
	require.Equal(t, moduleVersion(t, "github.com/nats-io/nats-server/v2"), vars["NATS_VERSION"], "compose runs the nats-server of go.mod")
	nats, ok := c.Services["nats"]
	require.True(t, ok, "a nats service")
	require.Contains(t, nats.commandLines(), "--jetstream")
	require.Contains(t, nats.Volumes, "nats-data:/data", "JetStream keeps the events on a volume")
	require.Contains(t, c.Volumes, "nats-data")
	for _, name := range []string{"worker", "gateway"} {
		s := c.Services[name]
		u, err := url.Parse(s.env(t)["TOLLGATE_NATS_URL"])
		require.NoError(t, err, name)
		require.Equal(t, "nats", u.Scheme, name)
		require.Equal(t, "nats:4222", u.Host, "%s reaches the nats service on its client port", name)
		require.Equal(t, "service_healthy", s.DependsOn["nats"].Condition, name)
	}
}

// The nats service's command and health check, run outside Docker on the
// nats-server built from go.mod's module: it starts with JetStream, the
// health check's URL answers, and a worker's and a gateway's connection
// create the event stream and carry a turn's events through it.
func TestComposeNATSCommandRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds nats-server")
	}
	c, _, _ := load(t)
	nats := c.Services["nats"]
	dir := t.TempDir()
	bin := filepath.Join(dir, "nats-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build nats-server: %s", out)

	ports := freePorts(t, 2)
	args := nats.commandLines()
	for i, a := range args {
		switch {
		case a == "/data":
			args[i] = filepath.Join(dir, "data")
		case a == "8222":
			args[i] = strconv.Itoa(ports[1])
		}
	}
	args = append(args, "--addr", "127.0.0.1", "--port", strconv.Itoa(ports[0]))
	ctx, cancel := context.WithCancel(context.Background())
	srv := exec.CommandContext(ctx, bin, args...)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { cancel(); _ = srv.Wait() })

	health := strings.Replace(nats.Healthcheck.Test[len(nats.Healthcheck.Test)-1], "localhost:8222", fmt.Sprintf("127.0.0.1:%d", ports[1]), 1)
	require.Eventually(t, func() bool {
		resp, err := http.Get(health)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "the health check's URL answers")

	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", ports[0])
	worker, err := stream.Connect(stream.Config{URL: natsURL, Name: "tollgate-worker"})
	require.NoError(t, err)
	defer worker.Close()
	gateway, err := stream.Connect(stream.Config{URL: natsURL, Name: "tollgate-gateway"})
	require.NoError(t, err)
	defer gateway.Close()
	require.Eventually(t, worker.Ready, 10*time.Second, 20*time.Millisecond)
	sub, err := stream.NewHub(gateway, 0).Subscribe(ctx, stream.Filter{Turn: "t"}, 0, 0)
	require.NoError(t, err)
	defer sub.Close()
	worker.Publish(stream.Event{Type: stream.TypeText, Turn: "t", Text: "hello"})
	select {
	case ev := <-sub.Events():
		require.Equal(t, "hello", ev.Text)
	case <-time.After(10 * time.Second):
		t.Fatalf("no event through the compose nats-server: %v", sub.Err())
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
		require.NoError(t, l.Close())
	}
	return out
}
