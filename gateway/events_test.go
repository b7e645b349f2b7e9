package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
)

var (
	natsOnce sync.Once
	natsSrv  *stream.Embedded
	natsDir  string
	natsErr  error
)

// sharedNATS is one embedded NATS server for the package's tests; they
// keep apart by turn id.
func sharedNATS(t testing.TB) string {
	t.Helper()
	natsOnce.Do(func() {
		natsDir, natsErr = os.MkdirTemp("", "tollgate-gateway-nats-")
		if natsErr != nil {
			return
		}
		natsSrv, natsErr = stream.StartEmbedded(natsDir, 0)
	})
	require.NoError(t, natsErr)
	return natsSrv.URL()
}

// sseEvent is one Server-Sent Event as a client sees it.
type sseEvent struct {
	id    uint64
	event string
	data  string
}

// sse reads a stream of events from the gateway, one at a time.
type sse struct {
	t      testing.TB
	resp   *http.Response
	events chan sseEvent
	cancel context.CancelFunc
	// comments counts keep-alive comments.
	mu       sync.Mutex
	comments int
}

func (e *env) watch(path, key string, header map[string]string) *sse {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.http.URL+path, nil)
	require.NoError(e.t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	s := &sse{t: e.t, resp: resp, events: make(chan sseEvent, 4096), cancel: cancel}
	e.t.Cleanup(s.close)
	if resp.StatusCode != http.StatusOK {
		return s
	}
	go func() {
		defer close(s.events)
		_ = scanSSE(resp.Body, func(ev sseEvent) { s.events <- ev }, func() {
			s.mu.Lock()
			s.comments++
			s.mu.Unlock()
		})
	}()
	return s
}

// scanSSE reads Server-Sent Events from r until it ends, handing each
// complete event to event and counting comment lines (keep-alives) with
// comment, which may be nil.
func scanSSE(r io.Reader, event func(sseEvent), comment func()) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" || cur.event != "" {
				event(cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"):
			if comment != nil {
				comment()
			}
		case strings.HasPrefix(line, "id: "):
			cur.id, _ = strconv.ParseUint(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return sc.Err()
}

func (s *sse) close() {
	s.cancel()
	_ = s.resp.Body.Close()
}

// until reads events until one satisfies stop, and returns them all.
func (s *sse) until(what string, stop func(sseEvent) bool) []sseEvent {
	s.t.Helper()
	var got []sseEvent
	timeout := time.After(waitTimeout)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatalf("the stream ended before %s; got %v", what, got)
			}
			got = append(got, ev)
			if stop(ev) {
				return got
			}
		case <-timeout:
			s.t.Fatalf("no %s within %s; got %v", what, waitTimeout, got)
		}
	}
}

// rest reads events until the stream ends.
func (s *sse) rest() []sseEvent {
	s.t.Helper()
	var got []sseEvent
	timeout := time.After(waitTimeout)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-timeout:
			s.t.Fatalf("the stream did not end within %s; got %v", waitTimeout, got)
		}
	}
}

func decode(t testing.TB, ev sseEvent) stream.Event {
	t.Helper()
	var out stream.Event
	require.NoError(t, json.Unmarshal([]byte(ev.data), &out), ev.data)
	require.Equal(t, ev.id, out.ID)
	require.Equal(t, ev.event, string(out.Type))
	return out
}

func cardIs(ev sseEvent, call string, state results.State) bool {
	if ev.event != "card" {
		return false
	}
	var e stream.Event
	return json.Unmarshal([]byte(ev.data), &e) == nil && e.Card != nil && e.Card.CallID == call && e.Card.State == state
}

func TestTurnEventsStreamTheTurnAndResumeWithoutGapsOrDuplicates(t *testing.T) {
	e := newEnv(t, envOptions{events: sharedNATS(t)})
	reader := e.key("watcher", []apikey.Scope{apikey.Read})
	ops := e.key("ops", readAnswer)
	id := e.park("", "two", "ann", 2)

	w := e.watch("/v1/turns/"+id+"/events", reader, nil)
	require.Equal(t, http.StatusOK, w.resp.StatusCode)
	require.Equal(t, "text/event-stream", w.resp.Header.Get("Content-Type"))
	first := w.until("the notify call waiting", func(ev sseEvent) bool { return cardIs(ev, "n1", results.StatePendingApproval) })

	var text strings.Builder
	for _, ev := range first {
		if d := decode(t, ev); d.Type == stream.TypeText {
			require.Equal(t, 1, d.Step)
			require.NotEmpty(t, d.Call)
			text.WriteString(d.Text)
		}
	}
	require.Equal(t, "Deploying and telling the channel.", text.String(), "the first reply arrives in pieces that add up to it")
	require.Greater(t, len(first), 4)

	for _, call := range []string{"d1", "n1"} {
		r := e.do(request{method: "POST", path: "/v1/turns/" + id + "/respond", key: ops, body: fmt.Sprintf(`{"call_id":%q,"decision":"approve"}`, call)})
		require.Equal(t, http.StatusOK, r.code, r.body)
	}
	rest := w.rest()
	all := append(first, rest...)
	require.Equal(t, "end", all[len(all)-1].event, "the stream ends after the result")
	res := all[len(all)-2]
	require.Equal(t, "result", res.event)
	var result struct {
		Status string `json:"status"`
		Text   string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(decode(t, res).Result, &result))
	require.Equal(t, "completed", result.Status)
	require.Equal(t, "Deployed and notified.", result.Text)

	var ids []uint64
	seen := map[string]bool{}
	for _, ev := range all[:len(all)-1] {
		if len(ids) > 0 {
			require.Greater(t, ev.id, ids[len(ids)-1], "ids increase")
		}
		ids = append(ids, ev.id)
		if ev.event == "card" {
			d := decode(t, ev)
			seen[d.Card.CallID+":"+string(d.Card.State)] = true
		}
	}
	for _, want := range []string{"d1:pending_approval", "n1:pending_approval", "d1:succeeded", "n1:succeeded"} {
		require.True(t, seen[want], "card %s was streamed; saw %v", want, seen)
	}

	// Reconnecting after any event gives exactly the events after it.
	cut := ids[len(ids)/2]
	again := e.watch("/v1/turns/"+id+"/events", reader, map[string]string{"Last-Event-ID": strconv.FormatUint(cut, 10)})
	var resumed []uint64
	for _, ev := range again.rest() {
		if ev.event != "end" {
			resumed = append(resumed, ev.id)
		}
	}
	require.Equal(t, ids[len(ids)/2+1:], resumed)

	// ?format=ai-sdk speaks the UI message stream protocol.
	ai := e.watch("/v1/turns/"+id+"/events?format=ai-sdk", reader, nil)
	require.Equal(t, "v1", ai.resp.Header.Get("x-vercel-ai-ui-message-stream"))
	var types []string
	var aiText strings.Builder
	for _, ev := range ai.rest() {
		if ev.data == "[DONE]" {
			types = append(types, "[DONE]")
			continue
		}
		var c struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev.data), &c), ev.data)
		types = append(types, c.Type)
		if c.Type == "text-delta" {
			aiText.WriteString(c.Delta)
		}
	}
	require.Equal(t, "start", types[0])
	require.Equal(t, []string{"finish", "[DONE]"}, types[len(types)-2:])
	for _, want := range []string{"start-step", "text-start", "text-end", "tool-input-start", "tool-input-delta", "tool-input-available", "tool-output-available", "finish-step", "data-tollgate-card"} {
		require.Contains(t, types, want)
	}
	require.Equal(t, "Deploying and telling the channel.Deployed and notified.", aiText.String())
}

func TestEventsKeepTheGatewaysRules(t *testing.T) {
	e := newEnv(t, envOptions{events: sharedNATS(t)})
	id := e.park("", "one", "ann", 1)
	path := "/v1/turns/" + id + "/events"

	r := e.do(request{method: "GET", path: path})
	require.Equal(t, http.StatusUnauthorized, r.code, r.body)
	r = e.do(request{method: "GET", path: path, key: e.key("starter", []apikey.Scope{apikey.Start})})
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	r = e.do(request{method: "GET", path: path, key: e.keyFor("bob-only", []apikey.Scope{apikey.Read}, "bob")})
	require.Equal(t, http.StatusNotFound, r.code, "a key limited to other users does not see the turn: %s", r.body)
	reader := e.key("reader", []apikey.Scope{apikey.Read})
	r = e.do(request{method: "GET", path: "/v1/turns/no-such-turn/events", key: reader})
	require.Equal(t, http.StatusNotFound, r.code, r.body)
	r = e.do(request{method: "GET", path: path, key: reader, header: map[string]string{"Last-Event-ID": "soon"}})
	require.Equal(t, http.StatusBadRequest, r.code, r.body)
	require.Contains(t, r.error(t), "Last-Event-ID must be the id of an event")
	r = e.do(request{method: "GET", path: path + "?format=xml", key: reader})
	require.Equal(t, http.StatusBadRequest, r.code, r.body)
	r = e.do(request{method: "POST", path: path, key: reader})
	require.Equal(t, http.StatusMethodNotAllowed, r.code, r.body)

	// A limited key for the turn's user does see it.
	ann := e.watch(path, e.keyFor("ann-only", []apikey.Scope{apikey.Read}, "ann"), nil)
	require.Equal(t, http.StatusOK, ann.resp.StatusCode)
	ann.until("the waiting card", func(ev sseEvent) bool { return cardIs(ev, "d1", results.StatePendingApproval) })
}

func TestEventsOffAnswer503(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.park("", "one", "ann", 1)
	r := e.do(request{method: "GET", path: "/v1/turns/" + id + "/events", key: e.key("reader", []apikey.Scope{apikey.Read})})
	require.Equal(t, http.StatusServiceUnavailable, r.code, r.body)
	require.Contains(t, r.error(t), "poll GET /v1/turns/{id}")
}

// finish approves every call of a parked turn of "one" and waits for its
// end, then counts its history events.
func (e *env) finishAndCount(id string) int {
	e.t.Helper()
	ops := e.key("ops-"+id, readAnswer)
	r := e.do(request{method: "POST", path: "/v1/turns/" + id + "/respond", key: ops, body: `{"call_id":"d1","decision":"approve"}`})
	require.Equal(e.t, http.StatusOK, r.code, r.body)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(e.t, e.caller.GetWorkflow(ctx, id, "").Get(ctx, nil))
	n := 0
	it := e.caller.GetWorkflowHistory(ctx, id, "", false, 0)
	for it.HasNext() {
		_, err := it.Next()
		require.NoError(e.t, err)
		n++
	}
	return n
}

// Streaming adds nothing to history: the same turn has as many events
// with live events on as with them off, and with NATS unreachable it
// completes the same way.
func TestStreamedTurnsHaveTheSameHistory(t *testing.T) {
	plain := newEnv(t, envOptions{})
	want := plain.finishAndCount(plain.park("", "one", "ann", 1))

	streamed := newEnv(t, envOptions{events: sharedNATS(t)})
	id := streamed.park("", "one", "ann", 1)
	w := streamed.watch("/v1/turns/"+id+"/events", streamed.key("reader", []apikey.Scope{apikey.Read}), nil)
	require.Equal(t, want, streamed.finishAndCount(id))
	evs := w.rest()
	require.Equal(t, "result", evs[len(evs)-2].event, "the turn was streamed")

	down := newEnv(t, envOptions{events: deadNATS(t)})
	require.False(t, down.events.Ready())
	require.Equal(t, want, down.finishAndCount(down.park("", "one", "ann", 1)))
	_, dropped := down.events.Counts()
	require.Positive(t, dropped, "events were dropped, not waited for")
	r := down.do(request{method: "GET", path: "/v1/turns/" + id + "/events", key: down.key("reader", []apikey.Scope{apikey.Read})})
	require.Equal(t, http.StatusServiceUnavailable, r.code, "clients are told to poll: %s", r.body)
}

// deadNATS is the URL of a port nothing listens on.
func deadNATS(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "nats://" + addr
}
