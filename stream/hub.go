package stream

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultHubRing is how many recent events a Hub keeps in memory for each
// turn (or session) that has watchers: a watcher this close behind reads
// them from memory, one further behind from JetStream.
const DefaultHubRing = 1024

// Hub fans one turn's (or session's) events out to every subscriber in
// this process: one JetStream consumer per filter, however many watch it,
// instead of one per watcher. Each subscriber keeps its own position; a
// subscriber that starts from an older id than the hub holds, or falls
// further behind than the hub holds, reads from JetStream with a consumer
// of its own until it is back within reach of the hub, and then reads
// from the hub again, without a gap or a duplicate.
//
// A subscriber that has read everything the ring holds is handed each
// new event by the goroutine that reads the consumer, every such
// subscriber one event before any gets the next: with a hundred watchers
// of a fast reply, the last watcher's first token waits for ninety-nine
// hand-overs, not for ninety-nine watchers to drain the ring. One whose
// hand-over is full reads from the ring at its own pace until it is
// caught up again.
//
// Memory stays bounded: the hub holds at most its ring of events per
// filter, each subscriber at most its buffer, and a subscriber that
// leaves a full buffer untaken for Config.SlowReader is closed with a
// LaggedError.
type Hub struct {
	n    *NATS
	ring int

	mu     sync.Mutex
	topics map[Filter]*topic
	// linger times how long caught-up members keep their goroutines.
	linger Periods
}

var _ Source = (*Hub)(nil)

// NewHub returns a Hub over n that keeps ring recent events per filter
// (0: DefaultHubRing).
func NewHub(n *NATS, ring int) *Hub {
	if ring <= 0 {
		ring = DefaultHubRing
	}
	return &Hub{n: n, ring: ring, topics: map[Filter]*topic{}}
}

// Topics is how many JetStream consumers the hub holds open: one per
// filter that has subscribers.
func (h *Hub) Topics() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics)
}

// topic is one filter's shared consumer and its recent events.
type topic struct {
	f     Filter
	ready chan struct{} // closed once the consumer is set up (or failed)
	it    jetstream.MessagesContext

	mu sync.Mutex
	// ring holds the events with ids in (from, last], oldest first:
	// events[head], events[head+1], ... modulo its length.
	events    []Event
	head, len int
	from      uint64
	// dropped: the ring has let old events go, so from is the id of a
	// real event rather than where the consumer started (see caughtUp).
	dropped bool
	// live are the subscribers that are caught up: add hands them each
	// new event itself.
	live []*member
	err  error
	refs int
}

// member is one hub subscriber. While it is caught up it is on its
// topic's live list and has no goroutine: add hands it each new event,
// and whoever takes it off the list (add when its hand-over is full, end,
// or its context ending) starts a goroutine to follow from cursor or
// finishes it. Only the one that took it off the list sends on its
// channel or closes it.
type member struct {
	s   *Subscription
	h   *Hub
	t   *topic
	ctx context.Context
	// cursor is the id of the last event handed over.
	cursor uint64
	// unwatch stops the context.AfterFunc that ends a caught-up member.
	unwatch func() bool
	// parked (under the topic's lock): m is on the live list with no
	// goroutine. A member that has just caught up keeps its goroutine
	// for followLinger first, waiting on wake, so that a watcher of a
	// fast reply, which falls behind and catches up again and again,
	// does not start a goroutine each time.
	parked bool
	wake   chan struct{}
}

// followLinger is how long a caught-up member's goroutine waits for the
// next event before it ends: until the end of the hub's current period of
// this length, timed by one timer for all of them (a timer each, reset at
// every catching up, costs a fast reply's watchers more than it saves).
const followLinger = 100 * time.Millisecond

// Periods hands out a channel that closes at the end of the current
// period; the next period starts when someone asks for it, so an idle
// holder (a hub, a gateway with no watchers) holds no timer. Many waiters
// share one timer instead of a ticker each.
type Periods struct {
	mu sync.Mutex
	ch chan struct{}
}

// Next returns the channel of the current period of length every,
// starting one if none runs.
func (p *Periods) Next(every time.Duration) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil {
		ch := make(chan struct{})
		p.ch = ch
		time.AfterFunc(every, func() {
			p.mu.Lock()
			if p.ch == ch {
				p.ch = nil
			}
			p.mu.Unlock()
			close(ch)
		})
	}
	return p.ch
}

// resume has m, just taken off the live list by the caller (holding the
// topic's lock), follow from its cursor: on its lingering goroutine, or
// on a new one.
func (m *member) resume() {
	if m.parked {
		m.parked = false
		go m.follow(m.cursor)
		return
	}
	m.wake <- struct{}{}
}

// wait holds a member that has just joined the live list for up to
// followLinger. It returns true when m was taken off the list meanwhile
// and its goroutine follows on from m.cursor, false when the goroutine
// is to end: m is parked, or ended by cancelled.
func (m *member) wait() bool {
	select {
	case <-m.wake:
		return true
	case <-m.ctx.Done():
	case <-m.h.linger.Next(followLinger):
	}
	t := m.t
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.live {
		if o == m {
			// Parked: add or end starts a goroutine for it, or, if its
			// context has ended, cancelled finishes it.
			m.parked = true
			return false
		}
	}
	// Taken off the list: by add or end, which signalled wake, or by
	// cancelled, which finishes m itself.
	select {
	case <-m.wake:
		return true
	default:
		return false
	}
}

// Subscribe delivers the events that match f with ids after after, as
// NATS.Subscribe does, through the filter's shared consumer.
func (h *Hub) Subscribe(ctx context.Context, f Filter, after uint64, buffer int) (*Subscription, error) {
	n := h.n
	if !n.nc.IsConnected() {
		return nil, ErrUnavailable
	}
	if !n.ready.Load() {
		if err := n.ensure(ctx); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	if _, err := n.filterSubject(f); err != nil {
		return nil, err
	}
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	// The ring is what waits for a reader; its channel only hands events
	// over, so an idle watcher costs little.
	buffer = min(buffer, hubHandoff)
	if f.All && after == 0 {
		// From now on: after the newest event in the log, a position
		// that the shared consumer and a catch-up read agree on.
		info, err := n.js.Stream(ctx, n.cfg.Stream)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		after = info.CachedInfo().State.LastSeq
	}
	t, err := h.acquire(ctx, f, after)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Subscription{events: make(chan Event, buffer), stall: n.cfg.SlowReader, done: make(chan struct{}), stop: cancel}
	m := &member{s: s, h: h, t: t, ctx: ctx, wake: make(chan struct{}, 1)}
	// A caught-up member has no goroutine to notice its context ending:
	// this does, without one until then.
	m.unwatch = context.AfterFunc(ctx, m.cancelled)
	go m.follow(after)
	return s, nil
}

// acquire returns f's topic, starting its consumer after after when it
// has none.
func (h *Hub) acquire(ctx context.Context, f Filter, after uint64) (*topic, error) {
	h.mu.Lock()
	t := h.topics[f]
	if t == nil {
		t = &topic{f: f, ready: make(chan struct{}), from: after}
		h.topics[f] = t
		t.refs++
		h.mu.Unlock()
		// The consumer outlives the request that started it.
		_, it, err := h.n.messages(context.WithoutCancel(ctx), f, after)
		if err != nil {
			t.end(err)
			h.release(t)
			close(t.ready)
			return nil, err
		}
		t.it = it
		close(t.ready)
		go h.read(t)
		return t, nil
	}
	t.refs++
	h.mu.Unlock()
	select {
	case <-t.ready:
	case <-ctx.Done():
		h.release(t)
		return nil, ctx.Err()
	}
	if t.it == nil {
		h.release(t)
		return nil, fmt.Errorf("%w: the shared consumer could not be set up", ErrUnavailable)
	}
	return t, nil
}

// release drops a subscriber; the last one stops the topic's consumer.
func (h *Hub) release(t *topic) {
	h.mu.Lock()
	t.refs--
	last := t.refs == 0
	if last && h.topics[t.f] == t {
		delete(h.topics, t.f)
	}
	h.mu.Unlock()
	if last && t.it != nil {
		t.it.Stop()
	}
}

// read moves the consumer's events into the topic's ring.
func (h *Hub) read(t *topic) {
	for {
		msg, err := t.it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				err = nil
			}
			// A topic whose consumer failed takes no new subscribers;
			// the next one starts another.
			h.mu.Lock()
			if h.topics[t.f] == t {
				delete(h.topics, t.f)
			}
			h.mu.Unlock()
			if err == nil {
				err = errors.New("the shared consumer stopped")
			}
			t.end(fmt.Errorf("%w: %v", ErrUnavailable, err))
			return
		}
		ev, _, ok := decode(msg)
		if !ok {
			continue
		}
		t.add(ev, h.ring)
	}
}

func (t *topic) add(ev Event, capacity int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.len > 0 && ev.ID <= t.at(t.len-1).ID {
		return
	}
	if t.len == len(t.events) {
		if len(t.events) < capacity {
			// Grow: an idle or short turn keeps a small ring.
			grown := make([]Event, min(capacity, max(16, 2*len(t.events))))
			for i := range t.len {
				grown[i] = t.at(i)
			}
			t.events, t.head = grown, 0
		} else {
			t.from = t.events[t.head].ID
			t.dropped = true
			t.events[t.head] = Event{}
			t.head = (t.head + 1) % len(t.events)
			t.len--
		}
	}
	t.events[(t.head+t.len)%len(t.events)] = ev
	t.len++
	// Breadth first, without blocking: a subscriber whose hand-over is
	// full leaves the list and reads from the ring instead.
	for i := 0; i < len(t.live); {
		m := t.live[i]
		select {
		case m.s.events <- ev:
			m.cursor = ev.ID
			i++
		default:
			last := len(t.live) - 1
			t.live[i], t.live[last] = t.live[last], nil
			t.live = t.live[:last]
			m.resume()
		}
	}
}

func (t *topic) at(i int) Event { return t.events[(t.head+i)%len(t.events)] }

func (t *topic) end(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
		// Each finds the error after its last event and says so.
		for _, m := range t.live {
			m.resume()
		}
		clear(t.live)
		t.live = t.live[:0]
	}
}

// leave takes m off the live list and reports whether it was on it.
func (t *topic) leave(m *member) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, o := range t.live {
		if o == m {
			last := len(t.live) - 1
			t.live[i], t.live[last] = t.live[last], nil
			t.live = t.live[:last]
			return true
		}
	}
	return false
}

// since copies up to limit of the events after cursor into out. covered
// is false when the ring no longer holds the event after cursor (or
// never did): the caller reads from JetStream instead. When there is
// nothing after cursor, the topic goes on and m's context has not ended,
// m joins the live list at cursor (joined): add hands it the next events,
// in the same critical section that decided there were none, so none is
// missed. err is why the topic ended, once it has.
func (t *topic) since(cursor uint64, out []Event, limit int, m *member) (evs []Event, covered, joined bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cursor < t.from {
		return out, false, false, t.err
	}
	i := sort.Search(t.len, func(i int) bool { return t.at(i).ID > cursor })
	for ; i < t.len && len(out) < limit; i++ {
		out = append(out, t.at(i))
	}
	// m.cancelled takes m off the list under t.mu once ctx has ended, so
	// checking here, under it, leaves no moment in which m joins unseen.
	if len(out) == 0 && t.err == nil && m.ctx.Err() == nil {
		m.cursor = cursor
		t.live = append(t.live, m)
		return out, true, true, nil
	}
	return out, true, false, t.err
}

// caughtUp reports whether a subscriber at cursor, whose own consumer has
// nothing more to deliver right now, may read from the ring: true when the
// ring covers cursor, or when the ring is empty and has dropped nothing,
// so that nothing lies between cursor and what the ring will get. It
// returns the position to continue from.
func (t *topic) caughtUp(cursor uint64, pendingNone bool) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cursor >= t.from {
		return cursor, true
	}
	if pendingNone && t.len == 0 && !t.dropped {
		return t.from, true
	}
	return cursor, false
}

// hubHandoff bounds a hub subscription's channel.
const hubHandoff = 8

// followBatch bounds what a subscriber copies out of the ring at once.
const followBatch = 16

// follow delivers the topic's events after cursor to m's reader while it
// is behind: from the ring, or from JetStream when the ring no longer
// holds them. It returns once m is caught up and on the live list, where
// add hands it events without a goroutine of its own, or once m ends: its
// context ended, the topic ended, or the reader lagged.
func (m *member) follow(cursor uint64) {
	s, t := m.s, m.t
	var batch []Event
	for {
		if m.ctx.Err() != nil {
			m.finish()
			return
		}
		evs, covered, joined, err := t.since(cursor, batch[:0], followBatch, m)
		if joined {
			// Caught up, perhaps for long: hold no copies meanwhile.
			batch = nil
			if !m.wait() {
				return
			}
			cursor = m.cursor
			continue
		}
		if !covered {
			var ok bool
			if cursor, ok = s.catchUp(m.ctx, m.h, t, cursor); !ok {
				m.finish()
				return
			}
			continue
		}
		batch = evs
		for i := range evs {
			if !s.deliver(m.ctx, evs[i], cursor) {
				m.finish()
				return
			}
			cursor = evs[i].ID
		}
		clear(evs)
		if len(evs) > 0 {
			continue
		}
		if err != nil {
			s.fail(err)
			m.finish()
			return
		}
	}
}

// cancelled ends m when its context ends, if m is caught up; a member
// that is behind has a goroutine in follow that sees the context end.
func (m *member) cancelled() {
	if m.t.leave(m) {
		m.finish()
	}
}

// finish closes m's channel and lets go of its topic. Its caller holds m,
// off the live list.
func (m *member) finish() {
	m.unwatch()
	// Released first: once a reader sees the channel closed, the
	// subscriber no longer holds the topic's consumer.
	m.h.release(m.t)
	close(m.s.events)
	close(m.s.done)
}

// deliver hands ev to the reader, waiting up to the stall time for room.
func (s *Subscription) deliver(ctx context.Context, ev Event, last uint64) bool {
	select {
	case s.events <- ev:
		return true
	default:
	}
	tm := time.NewTimer(s.stall)
	defer tm.Stop()
	select {
	case s.events <- ev:
		return true
	case <-tm.C:
		s.fail(&LaggedError{ResumeAfter: last})
		return false
	case <-ctx.Done():
		return false
	}
}

// catchUp reads the events after cursor from JetStream, with a consumer
// of its own, until the hub's ring holds the next one.
func (s *Subscription) catchUp(ctx context.Context, h *Hub, t *topic, cursor uint64) (uint64, bool) {
	cons, it, err := h.n.messages(ctx, t.f, cursor)
	if err != nil {
		s.fail(err)
		return cursor, false
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	pendingNone := false
	if ci := cons.CachedInfo(); ci != nil {
		pendingNone = ci.NumPending == 0
	}
	for {
		if next, ok := t.caughtUp(cursor, pendingNone); ok {
			return next, true
		}
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() == nil {
				s.fail(fmt.Errorf("%w: %v", ErrUnavailable, err))
			}
			return cursor, false
		}
		ev, pending, ok := decode(msg)
		if !ok {
			continue
		}
		pendingNone = pending == 0
		if ev.ID <= cursor {
			continue
		}
		if !s.deliver(ctx, ev, cursor) {
			return cursor, false
		}
		cursor = ev.ID
	}
}
