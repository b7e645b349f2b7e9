package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/workflows"
)

// The production shape of live events, each piece its own process: a
// nats-server with JetStream (built from go.mod's module, as compose runs
// it), a worker, and two gateways. A watcher on either gateway reads the
// tokens of a turn that runs on the worker, which only the NATS server
// connects to them.
func TestLiveEventsAcrossProcessesThroughANATSServer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds nats-server, the worker and the gateway and runs them as subprocesses")
	}
	buildW := buildWorker(t)
	dir := t.TempDir()
	root := moduleRoot(t)
	for _, pkg := range []string{"github.com/nats-io/nats-server/v2", "./cmd/gateway"} {
		build := exec.Command("go", "build", "-ldflags=-s -w", "-o", dir+"/", pkg)
		build.Dir = root
		out, err := build.CombinedOutput()
		require.NoError(t, err, "go build %s: %s", pkg, out)
	}
	ports := freeLoopbackPorts(t, 3)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", ports[0])
	startBackground(t, dir, "nats", filepath.Join(dir, "nats-server"), "--jetstream", "--store_dir", filepath.Join(dir, "nats-data"), "--addr", "127.0.0.1", "--port", strconv.Itoa(ports[0]))

	e := newEnv(t, "stream_procs")
	model := newStreamingModel(t, false)
	startWorkerProcess(t, e, buildW(), "1", append(openAIAt(model.URL+"/v1"), "TOLLGATE_NATS_URL="+natsURL)...)

	keysFile := filepath.Join(dir, "keys.json")
	add := exec.Command(filepath.Join(dir, "gateway"), "keys", "add", "--principal", "watcher", "--scopes", "read", "--file", keysFile)
	out, err := add.Output()
	require.NoError(t, err)
	key := strings.TrimSpace(string(out))
	var gateways []string
	for i, port := range ports[1:] {
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		startBackground(t, dir, fmt.Sprintf("gateway-%d", i+1), filepath.Join(dir, "gateway"),
			"--address", e.hostPort, "--namespace", e.namespace, "--task-queue", e.tq, "--data", e.data,
			"--listen", addr, "--keys", keysFile, "--nats-url", natsURL, "--log-level", "warn")
		gateways = append(gateways, "http://"+addr)
	}

	run := e.start(workflows.Input{Prompt: "Say it in two parts", Model: "openai:fake-model"})
	for _, gw := range gateways {
		text := readTurnText(t, gw, key, run.GetID())
		require.Equal(t, streamedReply, text, "the watcher on %s read the turn's tokens", gw)
	}
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, streamedReply, res.Text)
}

// readTurnText follows a turn's events on a gateway to its result and
// returns its text, retrying while the gateway starts.
func readTurnText(t *testing.T, gateway, key, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var resp *http.Response
	require.Eventually(t, func() bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, gateway+"/v1/turns/"+id+"/events", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+key)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		if r.StatusCode != http.StatusOK {
			_ = r.Body.Close()
			return false
		}
		resp = r
		return true
	}, time.Minute, 200*time.Millisecond, "the gateway at %s serves the turn's events", gateway)
	defer resp.Body.Close()
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev stream.Event
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		switch ev.Type {
		case stream.TypeText:
			text.WriteString(ev.Text)
		case stream.TypeReset:
			text.Reset()
		case stream.TypeResult:
			return text.String()
		}
	}
	t.Fatalf("the stream from %s ended before the result (%v); text so far %q", gateway, sc.Err(), text.String())
	return ""
}

// startBackground runs a program until the test ends, its output in a
// log shown if the test fails.
func startBackground(t *testing.T, dir, name, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = workerEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, b)
		}
	})
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func freeLoopbackPorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	return out
}
