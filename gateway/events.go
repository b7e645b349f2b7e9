package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/tollgate-dev/tollgate/stream"
)

// Live events: GET /v1/turns/{id}/events and GET /v1/sessions/{id}/events
// as Server-Sent Events, from the event log (stream.Source). The read
// scope applies, and a key limited to some users reaches only their turns,
// as on GET /v1/turns/{id}.
//
// A watcher resumes with Last-Event-ID (or ?after=). The gateway holds
// at most Options.EventsBuffer events for a watcher; one that leaves them
// untaken too long (stream.Config.SlowReader) is sent a "lagged" event
// with the id to resume after and closed.

// Defaults for the live event options.
const (
	DefaultEventsKeepAlive = 15 * time.Second
	// eventsWriteTimeout is how long one write to a watcher may take
	// before the watcher is given up on: its connection is stuck.
	eventsWriteTimeout = 10 * time.Second
	// closedTurnIdle ends the stream of a turn that had already ended
	// when no more events come: what was kept has been sent.
	closedTurnIdle = 2 * time.Second
	// eventsPerFlush bounds how many events a watcher's stream holds
	// back before flushing them.
	eventsPerFlush = 8
)

// AISDKHeader is the header the Vercel AI SDK's UI message stream
// protocol answers with.
const AISDKHeader = "x-vercel-ai-ui-message-stream"

func (s *Server) turnEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.serveEvents(w, r, id, stream.Filter{Turn: id}, true)
}

func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.serveEvents(w, r, id, stream.Filter{Session: id}, false)
}

// eventWriter writes events in one of the two formats.
type eventWriter interface {
	start() string
	// appendEvent appends ev as the format writes it to dst.
	appendEvent(dst []byte, ev stream.Event) []byte
	// end is what closes a stream that is complete (the turn ended).
	end() string
	lagged(after uint64) string
}

func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, id string, f stream.Filter, isTurn bool) {
	// The checks and the start are a call of their own, so that their
	// locals are off the stack that the loop below holds while it waits,
	// perhaps for hours (startWatch says why that matters).
	ws, out, ok := s.openEvents(w, r, id, f, isTurn)
	if !ok {
		return
	}
	ref, sub := ws.ref, ws.sub
	defer sub.Close()
	es := &eventStream{w: w, rc: http.NewResponseController(w), sub: sub}
	if !es.write(out.start()) {
		return
	}
	keep := s.keepAlive.Next(s.opts.EventsKeepAlive)
	// A turn that has ended gets what was kept of its events, then the end.
	var idle <-chan time.Time
	if !ref.open {
		t := time.NewTimer(closedTurnIdle)
		defer t.Stop()
		idle = t.C
	}
	for {
		select {
		case ev, ok := <-sub.Events():
			if !es.take(out, &ev, ok, isTurn) {
				return
			}
		case <-idle:
			es.write(out.end())
			return
		case <-keep:
			if !es.write(": keep-alive\n\n") {
				return
			}
			keep = s.keepAlive.Next(s.opts.EventsKeepAlive)
		case <-r.Context().Done():
			return
		}
	}
}

// eventStream writes one watcher's events. Its methods are kept out of
// serveEvents (noinline): inlined at each call, they would make the frame
// that a waiting watcher's goroutine holds several times larger.
type eventStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	sub *stream.Subscription
	// Events that are already waiting go out in one write and one flush,
	// which is what keeps a fast reply cheap for many watchers: pending
	// collects them, at most eventsPerFlush, so that a watcher that never
	// finds its hand-over empty still gets the first of them soon.
	pending []byte
	queued  int
}

// take writes ev, or with ok false what ends the stream (lagged), and
// says whether the stream goes on.
//
//go:noinline
func (es *eventStream) take(out eventWriter, ev *stream.Event, ok, isTurn bool) bool {
	if !ok {
		var lag *stream.LaggedError
		if errors.As(es.sub.Err(), &lag) {
			es.write(out.lagged(lag.ResumeAfter))
		}
		return false
	}
	// A copy: ev, the receiving loop's variable, stays on its stack.
	es.pending = out.appendEvent(es.pending, *ev)
	es.queued++
	if len(es.sub.Events()) > 0 && es.queued < eventsPerFlush && ev.Type != stream.TypeResult {
		return true
	}
	if !es.flush() {
		return false
	}
	if isTurn && ev.Type == stream.TypeResult {
		es.write(out.end())
		return false
	}
	return true
}

//go:noinline
func (es *eventStream) flush() bool {
	if len(es.pending) == 0 {
		return true
	}
	_ = es.rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
	_, err := es.w.Write(es.pending)
	es.pending, es.queued = es.pending[:0], 0
	if len(es.sub.Events()) == 0 {
		// Nothing waits: an idle watcher holds no buffer.
		es.pending = nil
	}
	return err == nil && es.rc.Flush() == nil
}

//go:noinline
func (es *eventStream) write(s string) bool {
	es.pending = append(es.pending, s...)
	return es.flush()
}

// openEvents checks an events request, reads its turn (or session) and
// subscribes to its events, and answers the request with the stream's
// headers, or with why not (ok false).
func (s *Server) openEvents(w http.ResponseWriter, r *http.Request, id string, f stream.Filter, isTurn bool) (ws watchStart, out eventWriter, ok bool) {
	if s.opts.Events == nil {
		fail(w, r, http.StatusServiceUnavailable, "live events are off on this gateway (it has no NATS); poll GET /v1/turns/{id} for the turn's state instead")
		return ws, nil, false
	}
	after, err := resumeAfter(r)
	if err != nil {
		fail(w, r, http.StatusBadRequest, err.Error())
		return ws, nil, false
	}
	switch format := r.URL.Query().Get("format"); format {
	case "", "tollgate":
		out = sseWriter{}
	case "ai-sdk":
		out = &aisdkWriter{message: id}
	default:
		fail(w, r, http.StatusBadRequest, fmt.Sprintf("format %q is not known; use tollgate (the default) or ai-sdk", format))
		return ws, nil, false
	}
	what := "session"
	if isTurn {
		what = "turn"
	}
	ws = s.startWatch(r, id, f, after, what)
	if ws.err != nil {
		s.temporalFailure(w, r, "read the "+what, ws.err)
		return ws, nil, false
	}
	if ws.subErr != nil {
		s.log.Warn("Live events unavailable", "error", ws.subErr)
		w.Header().Set("Retry-After", retryAfter)
		fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("live events are unavailable right now; poll GET /v1/turns/{id} for the %s's state, or try again later", what))
		return ws, nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	if _, ok := out.(*aisdkWriter); ok {
		h.Set(AISDKHeader, "v1")
	}
	w.WriteHeader(http.StatusOK)
	return ws, out, true
}

// watchStart is what a watcher's stream starts from.
type watchStart struct {
	ref turnRef
	// err is why the turn (or session) could not be read for this key,
	// subErr why its events could not be subscribed to.
	err, subErr error
	sub         *stream.Subscription
}

// startWatch reads the turn (or session) and subscribes to its events on
// a goroutine that ends when it returns. The calls into Temporal and NATS
// grow a goroutine's stack to several times what a watcher then needs,
// and the collector gives that back only by halves, one per cycle; the
// handler's goroutine lives as long as its watcher, idle or not.
func (s *Server) startWatch(r *http.Request, id string, f stream.Filter, after uint64, what string) watchStart {
	done := make(chan watchStart, 1)
	go func() {
		var ws watchStart
		dctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
		ws.ref, ws.err = s.describeTurn(dctx, id, "")
		cancel()
		if ws.err == nil && principal(r).Limited() && !principal(r).Reaches(ws.ref.user) {
			ws.err = serviceerror.NewNotFound(what + " not reachable by this key")
		}
		if ws.err == nil {
			ws.sub, ws.subErr = s.opts.Events.Subscribe(r.Context(), f, after, s.opts.EventsBuffer)
		}
		done <- ws
	}()
	return <-done
}

// resumeAfter reads the id to resume after: the Last-Event-ID header an
// EventSource sends on reconnecting, or ?after= for other clients. An
// EventSource reconnects to the URL it was given, ?after= included, so the
// later of the two wins.
func resumeAfter(r *http.Request) (uint64, error) {
	var after uint64
	for name, v := range map[string]string{"Last-Event-ID": r.Header.Get("Last-Event-ID"), "after": r.URL.Query().Get("after")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s must be the id of an event (a whole number), not %q", name, v)
		}
		after = max(after, n)
	}
	return after, nil
}

// sseWriter is Tollgate's own format: each event is an SSE event named by
// its type, with its id, and the event as JSON.
type sseWriter struct{}

func (sseWriter) start() string { return "retry: 2000\n\n" }

func (sseWriter) appendEvent(dst []byte, ev stream.Event) []byte {
	b, err := ev.JSON()
	if err != nil {
		return dst
	}
	// Appended rather than formatted: this runs for every event and every
	// watcher, and b is shared by all of them.
	dst = strconv.AppendUint(append(dst, "id: "...), ev.ID, 10)
	dst = append(append(append(dst, "\nevent: "...), ev.Type...), "\ndata: "...)
	return append(append(dst, b...), "\n\n"...)
}

func (sseWriter) end() string { return "event: end\ndata: {}\n\n" }

func (sseWriter) lagged(after uint64) string {
	return fmt.Sprintf("event: lagged\ndata: {\"resume_after\":%d}\n\n", after)
}

// liveTurnPage is GET /live/{id}: a static page that follows the turn's
// events in the AI SDK's format and renders its message, as a starting
// point for a page of your own (docs/streaming.md). It holds no data of
// the turn; its script reads the events route with the inbox's session
// cookie, so what it shows is what that key may read.
type liveTurnPage struct {
	pageBase
	TurnID string
}

func (s *Server) liveTurn(w http.ResponseWriter, r *http.Request) {
	nonce := newNonce()
	id := r.PathValue("id")
	render(w, http.StatusOK, "live", nonce, liveTurnPage{pageBase: pageBase{Title: "Turn " + id, Nonce: nonce}, TurnID: id})
}
