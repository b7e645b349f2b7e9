package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/workflows"
)

// A real SSE client over HTTP that stops reading while a turn streams
// megabytes of deltas is closed with `event: lagged` naming the last event
// it was sent, rather than the gateway holding the rest for it; reconnecting
// with Last-Event-ID at that id brings the rest of the reply, with no delta
// missing and none twice.
func TestASlowSSEClientIsClosedWithLaggedAndResumesWithoutGapsOrDuplicates(t *testing.T) {
	e := newEnv(t, envOptions{events: sharedNATS(t)})
	reader := e.key("slow", []apikey.Scope{apikey.Read})

	// A gateway of its own whose watchers may stall for 300ms, not 5s.
	n, err := stream.Connect(stream.Config{URL: sharedNATS(t), SlowReader: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(n.Close)
	srv, err := gateway.New(gateway.Options{
		Events:         n,
		Temporal:       e.caller,
		TaskQueue:      e.tq,
		Keys:           e.keys,
		Links:          e.signer,
		RespondTimeout: 10 * time.Second,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	// Small socket buffers on both sides, so that a few hundred KiB fill
	// them, as megabytes would with the kernel's own sizes.
	hs := httptest.NewUnstartedServer(srv)
	hs.Listener = smallSendBuffers{hs.Listener}
	hs.Start()
	t.Cleanup(hs.Close)

	// Far more than the sockets between gateway and client hold.
	const deltas = 500
	pad := strings.Repeat("x", 1000)
	start, emitted := make(chan struct{}), make(chan struct{})
	name := fmt.Sprintf("slow-%d", seq.Add(1))
	liveModels.Store(name, func(ctx context.Context, _ model.Request) (model.Response, error) {
		select {
		case <-start:
		case <-ctx.Done():
			return model.Response{}, ctx.Err()
		}
		for i := range deltas {
			model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: strconv.Itoa(i) + ":" + pad})
		}
		close(emitted)
		return model.Response{Message: results.Message{Parts: []results.Part{results.TextPart("done")}}, StopReason: model.StopEnd}, nil
	})
	id := fmt.Sprintf("%s-slow-%d", e.name, seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}.Start(ctx, id, workflows.Input{Prompt: "talk", Model: "gw:" + name})
	require.NoError(t, err)
	e.turns = append(e.turns, id)

	// The slow client: a small receive buffer, and it reads nothing until
	// the reply has been written and the gateway has waited out its stall.
	slow := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				err = c.(*net.TCPConn).SetReadBuffer(4096)
			}
			return c, err
		},
	}}
	t.Cleanup(slow.CloseIdleConnections)
	first := openSSE(t, ctx, slow, hs.URL+"/v1/turns/"+id+"/events", reader, "")
	close(start)
	select {
	case <-emitted:
	case <-ctx.Done():
		t.Fatal("the model did not write its reply")
	}
	// The stall (300ms) passes while the gateway's write waits on the full
	// socket; its write timeout (10s) does not.
	time.Sleep(time.Second)
	got := readSSE(t, first)
	require.NotEmpty(t, got)
	last := got[len(got)-1]
	require.Equal(t, "lagged", last.event, "the stream ends with lagged")
	var lag struct {
		ResumeAfter uint64 `json:"resume_after"`
	}
	require.NoError(t, json.Unmarshal([]byte(last.data), &lag))
	before := got[:len(got)-1]
	require.NotEmpty(t, before)
	require.Equal(t, before[len(before)-1].id, lag.ResumeAfter, "lagged names the last event sent")
	texts := deltaNumbers(t, before)
	require.Less(t, len(texts), deltas, "the slow client was not sent the whole reply")
	t.Logf("the slow client got %d of %d deltas, then lagged with resume_after %d", len(texts), deltas, lag.ResumeAfter)
	for _, ev := range before {
		require.NotEqual(t, "result", ev.event)
	}

	// Resuming at that id: the rest, then the end.
	rest := readSSE(t, openSSE(t, ctx, http.DefaultClient, hs.URL+"/v1/turns/"+id+"/events", reader, strconv.FormatUint(lag.ResumeAfter, 10)))
	require.NotEmpty(t, rest)
	require.Equal(t, "end", rest[len(rest)-1].event)
	require.Greater(t, rest[0].id, lag.ResumeAfter)
	all := append(before, rest...)
	var prev uint64
	for _, ev := range all {
		if ev.id == 0 {
			continue
		}
		require.Greater(t, ev.id, prev, "ids increase across the two streams")
		prev = ev.id
	}
	texts = append(texts, deltaNumbers(t, rest)...)
	want := make([]int, deltas)
	for i := range want {
		want[i] = i
	}
	require.Equal(t, want, texts, "every delta once, in order")
}

// smallSendBuffers gives the connections it accepts a 4 KiB send buffer.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		err = c.(*net.TCPConn).SetWriteBuffer(4096)
	}
	return c, err
}

// openSSE opens a stream of events, resuming after lastID when it is set,
// and reads nothing from it yet.
func openSSE(t *testing.T, ctx context.Context, c *http.Client, url, key, lastID string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp
}

// readSSE reads a stream of events until the gateway closes it.
func readSSE(t *testing.T, resp *http.Response) []sseEvent {
	t.Helper()
	var got []sseEvent
	require.NoError(t, scanSSE(resp.Body, func(ev sseEvent) { got = append(got, ev) }, nil))
	return got
}

// deltaNumbers returns the numbers of the model's text deltas ("<k>:...")
// among evs, in the order they came.
func deltaNumbers(t *testing.T, evs []sseEvent) []int {
	t.Helper()
	var out []int
	for _, ev := range evs {
		if ev.event != "text" {
			continue
		}
		k, err := strconv.Atoi(strings.SplitN(decode(t, ev).Text, ":", 2)[0])
		require.NoError(t, err)
		out = append(out, k)
	}
	return out
}
