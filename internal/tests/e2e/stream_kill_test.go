package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/workflows"
)

// streamingModel is a fake Chat Completions server that streams: with
// hangFirst, the first request sends the start of its reply and then
// hangs until its client goes away (the worker dies mid-stream); every
// other request streams the whole reply.
type streamingModel struct {
	*httptest.Server
	requests atomic.Int64
}

const (
	streamedStart = "Part one, "
	streamedReply = "Part one, part two."
)

func newStreamingModel(t *testing.T, hangFirst bool) *streamingModel {
	t.Helper()
	m := &streamingModel{}
	chunk := func(w io.Writer, delta, finish string) {
		fin := "null"
		if finish != "" {
			fin = `"` + finish + `"`
		}
		fmt.Fprintf(w, `data: {"id":"chatcmpl-stream","object":"chat.completion.chunk","created":1741569952,"model":"fake-model","choices":[{"index":0,"delta":{"role":"assistant","content":%q},"finish_reason":%s}]}`+"\n\n", delta, fin)
		w.(http.Flusher).Flush()
	}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		n := m.requests.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		if n == 1 && hangFirst {
			chunk(w, "Part ", "")
			chunk(w, "one, ", "")
			// The worker is killed here.
			<-r.Context().Done()
			return
		}
		chunk(w, "Part ", "")
		chunk(w, "one, ", "")
		chunk(w, "part two.", "")
		chunk(w, "", "stop")
		fmt.Fprint(w, `data: {"id":"chatcmpl-stream","object":"chat.completion.chunk","created":1741569952,"model":"fake-model","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(m.Close)
	return m
}

// The worker process is SIGKILLed while its model call streams; the call
// is tried again on a new worker process, and the turn's stream says so:
// a reset for the call, then the new attempt's text. A watcher that keeps
// each call's text after its last reset has the final reply once, and so
// has the result.
func TestStreamResumesAfterAWorkerSIGKILLMidStream(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the worker binary and runs it as a subprocess")
	}
	build := buildWorker(t)
	nats, err := stream.StartEmbedded(t.TempDir(), 0)
	require.NoError(t, err)
	t.Cleanup(nats.Shutdown)
	model := newStreamingModel(t, true)
	e := newEnv(t, "stream_sigkill")
	bin := build()
	workerEnv := append(openAIAt(model.URL+"/v1"), "TOLLGATE_NATS_URL="+nats.URL())

	watcher, err := stream.Connect(stream.Config{URL: nats.URL()})
	require.NoError(t, err)
	t.Cleanup(watcher.Close)
	require.Eventually(t, watcher.Ready, 10*time.Second, 20*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first := startWorkerProcess(t, e, bin, "1", workerEnv...)
	run := e.start(workflows.Input{Prompt: "Say it in two parts", Model: "openai:fake-model"})
	// From the turn's first event, whenever the subscription starts.
	sub, err := watcher.Subscribe(ctx, stream.Filter{Turn: run.GetID()}, 0, 4096)
	require.NoError(t, err)
	defer sub.Close()

	var events []stream.Event
	next := func(what string) stream.Event {
		t.Helper()
		select {
		case ev, ok := <-sub.Events():
			require.True(t, ok, "the stream ended before %s: %v", what, sub.Err())
			events = append(events, ev)
			return ev
		case <-ctx.Done():
			t.Fatalf("no %s; events so far: %v", what, events)
			return stream.Event{}
		}
	}
	var before strings.Builder
	for before.String() != streamedStart {
		if ev := next("the first attempt's text"); ev.Type == stream.TypeText {
			before.WriteString(ev.Text)
		}
	}
	first.kill(t)
	startWorkerProcess(t, e, bin, "2", workerEnv...)

	var reset *stream.Event
	var after strings.Builder
	for {
		ev := next("the result")
		if ev.Type == stream.TypeReset {
			reset = &ev
			after.Reset()
		}
		if ev.Type == stream.TypeText {
			after.WriteString(ev.Text)
		}
		if ev.Type == stream.TypeResult {
			break
		}
	}
	require.NotNil(t, reset, "the retried call was announced with a reset")
	require.GreaterOrEqual(t, reset.Attempt, 2)
	require.Equal(t, streamedReply, after.String(), "after the reset, the new attempt's text, once")
	for _, ev := range events {
		if ev.Type == stream.TypeText {
			require.Equal(t, reset.Call, ev.Call, "one model call, the same before and after the retry")
		}
	}
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, streamedReply, res.Text, "no text twice in the result")
	require.GreaterOrEqual(t, model.requests.Load(), int64(2))
}
