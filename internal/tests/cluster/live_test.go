package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/workflows"
)

// liveReply is what the streaming turn's scripted model says, a word at a
// time (pace_ms: the scripted model pauses only when the worker streams).
const liveReply = "Streamed from a worker process, a word at a time, through nats-server to the gateway that did not start this turn."

// liveTurn is the streaming turn's id.
const liveTurn = "cluster-live"

const liveScript = `{"pace_ms": 40, "replies": [{"text": %q}]}`

// startNATS runs the nats-server bins.sh built, with JetStream, as
// compose's nats service does.
func startNATS(t *testing.T, logDir, bin string) string {
	t.Helper()
	port := freePorts(t, 1)[0]
	startProc(t, logDir, "nats-server", nil, nil, bin,
		"--jetstream", "--store_dir", t.TempDir(), "--addr", "127.0.0.1", "--port", strconv.Itoa(port))
	waitTCP(t, fmt.Sprintf("127.0.0.1:%d", port), 60*time.Second)
	return fmt.Sprintf("nats://127.0.0.1:%d", port)
}

// liveCheck is what the live events phase saw.
type liveCheck struct {
	deltas int
	reply  string
}

// checkLiveEvents starts two gateways on the same NATS server, starts a
// streaming turn through the first, and reads its events on the second:
// the worker that runs the turn reaches the second gateway only through
// NATS. The text deltas must add up to the reply in the turn's result.
func checkLiveEvents(t *testing.T, ctx context.Context, logDir, work, gatewayBin string, env []string, temporalAddress string) liveCheck {
	t.Helper()
	keysFile := filepath.Join(work, "keys.json")
	key := strings.TrimSpace(output(t, ctx, nil, gatewayBin, "keys", "add", "--principal", "cluster-test", "--scopes", "read,start", "--file", keysFile))
	ports := freePorts(t, 2)
	var gateways []string
	for i, port := range ports {
		name := fmt.Sprintf("gateway-%c", 'a'+i)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		require.NoError(t, os.MkdirAll(filepath.Join(work, name, "data"), 0o755))
		startProc(t, logDir, name, env, nil, gatewayBin,
			"--address", temporalAddress, "--namespace", namespace, "--task-queue", taskQueue,
			"--data", filepath.Join(work, name, "data"), "--listen", addr, "--keys", keysFile, "--log-level", "warn")
		waitTCP(t, addr, 60*time.Second)
		gateways = append(gateways, "http://"+addr)
	}

	body, err := json.Marshal(map[string]any{"id": liveTurn, "prompt": "Say it as it is written.", "model": "scripted:live.json", "max_steps": 2})
	require.NoError(t, err)
	// The gateway may still be dialling Temporal: a 503 is retried, any
	// other answer is the one that counts.
	var started *http.Response
	waitFor(t, time.Minute, "gateway-a to start the turn", func() bool {
		r := request(t, ctx, http.MethodPost, gateways[0]+"/v1/turns", key, body)
		if r == nil {
			return false
		}
		if r.StatusCode == http.StatusServiceUnavailable {
			t.Logf("POST /v1/turns on gateway-a: 503 %s", readAll(r))
			return false
		}
		started = r
		return true
	})
	msg := readAll(started)
	require.Equal(t, http.StatusCreated, started.StatusCode, "POST /v1/turns on gateway-a: %s", msg)

	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var events *http.Response
	waitFor(t, time.Minute, "gateway-b to serve the turn's events", func() bool {
		r := request(t, sctx, http.MethodGet, gateways[1]+"/v1/turns/"+liveTurn+"/events", key, nil)
		if r == nil {
			return false
		}
		if r.StatusCode != http.StatusOK {
			t.Logf("GET events on gateway-b: %d %s", r.StatusCode, readAll(r))
			return false
		}
		events = r
		return true
	})
	defer events.Body.Close()

	// Per model call, the text after its last reset: a retried call's
	// earlier pieces are void.
	text := map[string]*strings.Builder{}
	var calls []string
	deltas := 0
	var result struct {
		Status workflows.Status `json:"status"`
		Text   string           `json:"text"`
	}
	ended := false
	sc := bufio.NewScanner(events.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for !ended && sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev stream.Event
		require.NoError(t, json.Unmarshal([]byte(data), &ev), "event %s", data)
		switch ev.Type {
		case stream.TypeText:
			if text[ev.Call] == nil {
				text[ev.Call] = &strings.Builder{}
				calls = append(calls, ev.Call)
			}
			text[ev.Call].WriteString(ev.Text)
			deltas++
		case stream.TypeReset:
			if text[ev.Call] != nil {
				text[ev.Call].Reset()
			}
		case stream.TypeResult:
			require.NoError(t, json.Unmarshal(ev.Result, &result), "result event %s", data)
			ended = true
		}
	}
	require.True(t, ended, "the events stream on gateway-b ended before the result: %v", sc.Err())
	var streamed strings.Builder
	for _, c := range calls {
		streamed.WriteString(text[c].String())
	}
	require.Equal(t, workflows.StatusCompleted, result.Status)
	require.Equal(t, liveReply, result.Text)
	require.Equal(t, result.Text, streamed.String(), "the text deltas on gateway-b add up to the reply in the turn's result")
	require.Greater(t, deltas, 5, "the reply came in pieces, as the model wrote it, not at once")
	return liveCheck{deltas: deltas, reply: streamed.String()}
}

// request sends one request with the test's key; nil when it could not
// be sent (the gateway not listening yet).
func request(t *testing.T, ctx context.Context, method, url, key string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Logf("%s %s: %v", method, url, err)
		return nil
	}
	return r
}

func readAll(r *http.Response) string {
	defer r.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(r.Body)
	return strings.TrimSpace(b.String())
}
