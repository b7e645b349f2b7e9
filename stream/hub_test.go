package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// texts reads n events and returns their texts, checking ids increase.
func texts(t *testing.T, s *Subscription, n int) []string {
	t.Helper()
	var out []string
	var last uint64
	for range n {
		ev := next(t, s)
		require.Greater(t, ev.ID, last, "ids increase")
		last = ev.ID
		out = append(out, ev.Text)
	}
	return out
}

func numbers(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func TestHubSharesOneConsumerAmongItsSubscribers(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{})
	h := NewHub(n, 0)
	ctx := context.Background()
	subs := make([]*Subscription, 50)
	for i := range subs {
		s, err := h.Subscribe(ctx, Filter{Turn: "t"}, 0, 0)
		require.NoError(t, err)
		defer s.Close()
		subs[i] = s
	}
	require.Equal(t, 1, h.Topics(), "one consumer for the turn")
	other, err := h.Subscribe(ctx, Filter{Session: "s"}, 0, 0)
	require.NoError(t, err)
	require.Equal(t, 2, h.Topics(), "and one for the session")
	for i := range 200 {
		n.Publish(Event{Type: TypeText, Turn: "t", Session: "s", Text: fmt.Sprint(i)})
	}
	var wg sync.WaitGroup
	got := make([][]string, len(subs))
	for i, s := range subs {
		wg.Go(func() { got[i] = texts(t, s, 200) })
	}
	wg.Wait()
	for i := range subs {
		require.Equal(t, numbers(0, 200), got[i], "subscriber %d", i)
	}
	require.Equal(t, numbers(0, 200), texts(t, other, 200))

	// The encoding kept from the log is the event's own, id included.
	n.Publish(Event{Type: TypeCard, Turn: "t", Session: "s", Status: "waiting", Text: `"quoted" ü`})
	ev := next(t, subs[0])
	kept, err := ev.JSON()
	require.NoError(t, err)
	ev.encoded = nil
	fresh, err := json.Marshal(ev)
	require.NoError(t, err)
	require.JSONEq(t, string(fresh), string(kept))
	require.Contains(t, string(kept), fmt.Sprintf(`{"id":%d,`, ev.ID))

	other.Close()
	for _, s := range subs {
		s.Close()
	}
	require.Equal(t, 0, h.Topics(), "the last subscriber to leave stops the consumer")
}

// A subscriber that resumes from an older id than the hub's ring holds
// reads the gap from JetStream, then joins the live events, while they
// keep coming, without a gap or a duplicate.
func TestHubSubscriberResumingFromAnOlderIDJoinsWithoutGapsOrDuplicates(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{})
	h := NewHub(n, 8)
	ctx := context.Background()
	first, err := h.Subscribe(ctx, Filter{Turn: "t"}, 0, 0)
	require.NoError(t, err)
	defer first.Close()
	for i := range 100 {
		n.Publish(Event{Type: TypeText, Turn: "t", Text: fmt.Sprint(i)})
	}
	seen := make([]Event, 0, 100)
	for range 100 {
		seen = append(seen, next(t, first))
	}
	// The ring holds the last 8; resume after the 10th while more come.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 100; i < 400; i++ {
			n.Publish(Event{Type: TypeText, Turn: "t", Text: fmt.Sprint(i)})
			if i%20 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	late, err := h.Subscribe(ctx, Filter{Turn: "t"}, seen[9].ID, 4)
	require.NoError(t, err)
	defer late.Close()
	require.Equal(t, numbers(10, 400), texts(t, late, 390))
	<-done
	require.Equal(t, numbers(100, 400), texts(t, first, 300))
	require.Equal(t, 1, h.Topics())

	// A subscriber that joins after everything was sent, from the start.
	all, err := h.Subscribe(ctx, Filter{Turn: "t"}, 0, 0)
	require.NoError(t, err)
	defer all.Close()
	require.Equal(t, numbers(0, 400), texts(t, all, 400))
}

func TestHubClosesASlowReaderWithWhereToResume(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{SlowReader: 100 * time.Millisecond})
	h := NewHub(n, 16)
	ctx := context.Background()
	fast, err := h.Subscribe(ctx, Filter{Turn: "t"}, 0, 0)
	require.NoError(t, err)
	defer fast.Close()
	slow, err := h.Subscribe(ctx, Filter{Turn: "t"}, 0, 4)
	require.NoError(t, err)
	defer slow.Close()
	for i := range 50 {
		n.Publish(Event{Type: TypeText, Turn: "t", Text: fmt.Sprint(i)})
	}
	require.Equal(t, numbers(0, 50), texts(t, fast, 50), "a slow reader does not hold up the others")
	require.Eventually(t, func() bool { return slow.Err() != nil }, 10*time.Second, 10*time.Millisecond)
	var got []Event
	for ev := range slow.Events() {
		got = append(got, ev)
	}
	require.Len(t, got, 4, "the buffer, never more")
	var lag *LaggedError
	require.True(t, errors.As(slow.Err(), &lag), "%v", slow.Err())
	require.Equal(t, got[3].ID, lag.ResumeAfter)

	r, err := h.Subscribe(ctx, Filter{Turn: "t"}, lag.ResumeAfter, 0)
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, numbers(4, 50), texts(t, r, 46), "resuming continues without a gap")
}

// A reader that falls behind the ring but keeps reading is not closed: it
// reads from JetStream until it is back within the ring.
func TestHubReaderThatFallsBehindTheRingCatchesUp(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{SlowReader: 2 * time.Second})
	h := NewHub(n, 8)
	ctx := context.Background()
	s, err := h.Subscribe(ctx, Filter{Turn: "t"}, 0, 4)
	require.NoError(t, err)
	defer s.Close()
	go func() {
		for i := range 300 {
			n.Publish(Event{Type: TypeText, Turn: "t", Text: fmt.Sprint(i)})
		}
	}()
	for i := range 300 {
		if i%50 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		require.Equal(t, fmt.Sprint(i), next(t, s).Text)
	}
	require.NoError(t, s.Err())
}

func TestHubWithNATSDownIsUnavailable(t *testing.T) {
	e := embedded(t)
	n := connect(t, e.URL(), Config{})
	h := NewHub(n, 0)
	s, err := h.Subscribe(context.Background(), Filter{Turn: "t"}, 0, 0)
	require.NoError(t, err)
	defer s.Close()
	e.Shutdown()
	require.Eventually(t, func() bool { return !n.nc.IsConnected() }, 10*time.Second, 10*time.Millisecond)
	_, err = h.Subscribe(context.Background(), Filter{Turn: "u"}, 0, 0)
	require.ErrorIs(t, err, ErrUnavailable)
}

// Every turn's events, from now on: what came before is not replayed,
// even to a subscriber that joins after the hub's ring has moved on.
func TestHubAllStartsAtTheNewestEvent(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{})
	h := NewHub(n, 4)
	ctx := context.Background()
	n.Publish(Event{Type: TypeText, Turn: "old", Text: "before"})
	require.NoError(t, n.Flush(ctx))
	s, err := h.Subscribe(ctx, Filter{All: true}, 0, 0)
	require.NoError(t, err)
	defer s.Close()
	for i := range 10 {
		n.Publish(Event{Type: TypeText, Turn: fmt.Sprint("t", i%2), Session: "s", Text: fmt.Sprint(i)})
	}
	require.Equal(t, numbers(0, 10), texts(t, s, 10))
	late, err := h.Subscribe(ctx, Filter{All: true}, 0, 0)
	require.NoError(t, err)
	defer late.Close()
	n.Publish(Event{Type: TypeText, Turn: "new", Text: "after"})
	require.Equal(t, "after", next(t, late).Text)
	require.Equal(t, "after", next(t, s).Text)
}

// live is how many of f's subscribers the hub hands events to itself.
func live(h *Hub, f Filter) int {
	h.mu.Lock()
	t := h.topics[f]
	h.mu.Unlock()
	if t == nil {
		return -1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}

// Caught-up subscribers are handed each event by the goroutine that reads
// the consumer, all of them one event before any gets the next; one whose
// hand-over fills reads from the ring until it is caught up, then is
// handed events again, without a gap or a duplicate either way.
func TestHubHandsEventsToCaughtUpSubscribersAndTakesBackThoseThatFellBehind(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{SlowReader: 10 * time.Second})
	h := NewHub(n, 64)
	ctx := context.Background()
	f := Filter{Turn: "t"}
	subs := make([]*Subscription, 20)
	for i := range subs {
		s, err := h.Subscribe(ctx, f, 0, 0)
		require.NoError(t, err)
		defer s.Close()
		subs[i] = s
	}
	require.Eventually(t, func() bool { return live(h, f) == len(subs) }, 10*time.Second, 5*time.Millisecond, "idle subscribers are caught up")

	n.Publish(Event{Type: TypeText, Turn: "t", Text: "0"})
	require.Eventually(t, func() bool {
		for _, s := range subs {
			if len(s.Events()) != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "every subscriber holds the event")
	require.Equal(t, len(subs), live(h, f))

	// More than a hand-over holds, nobody reading: all fall behind.
	for i := 1; i <= hubHandoff+2; i++ {
		n.Publish(Event{Type: TypeText, Turn: "t", Text: fmt.Sprint(i)})
	}
	require.Eventually(t, func() bool { return live(h, f) == 0 }, 10*time.Second, 5*time.Millisecond, "full hand-overs are taken off the list")

	// Half of them read up: they are caught up and handed events again.
	got := make([][]string, len(subs))
	for i, s := range subs[:10] {
		got[i] = texts(t, s, hubHandoff+3)
	}
	require.Eventually(t, func() bool { return live(h, f) == 10 }, 10*time.Second, 5*time.Millisecond, "readers that caught up are back on the list")
	for i := hubHandoff + 3; i < 40; i++ {
		n.Publish(Event{Type: TypeText, Turn: "t", Text: fmt.Sprint(i)})
	}
	var wg sync.WaitGroup
	for i, s := range subs {
		wg.Go(func() {
			want := 40
			if i < 10 {
				want = 40 - len(got[i])
			}
			got[i] = append(got[i], texts(t, s, want)...)
		})
	}
	wg.Wait()
	for i := range subs {
		require.Equal(t, numbers(0, 40), got[i], "subscriber %d", i)
	}
	require.Eventually(t, func() bool { return live(h, f) == len(subs) }, 10*time.Second, 5*time.Millisecond)
}

// A caught-up subscriber costs no goroutine: a thousand idle watchers of
// a gateway would otherwise hold a thousand stacks. It still gets the
// next event, ends when its context does, and the last one to leave
// stops the topic's consumer.
func TestHubIdleSubscribersHoldNoGoroutine(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{SlowReader: 10 * time.Second})
	h := NewHub(n, 0)
	f := Filter{Turn: "idle"}
	// The topic's reader and the NATS client's own goroutines come with
	// the first subscriber: count from there.
	first, err := h.Subscribe(context.Background(), f, 0, 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return live(h, f) == 1 }, 10*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()

	const idle = 200
	ctx, cancel := context.WithCancel(context.Background())
	subs := make([]*Subscription, idle)
	for i := range subs {
		subs[i], err = h.Subscribe(ctx, f, 0, 0)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return live(h, f) == idle+1 }, 10*time.Second, 5*time.Millisecond, "idle subscribers are caught up")
	require.Eventually(t, func() bool { return runtime.NumGoroutine() < before+idle/10 }, 10*time.Second, 5*time.Millisecond,
		"%d idle subscribers hold %d goroutines", idle, runtime.NumGoroutine()-before)

	n.Publish(Event{Type: TypeText, Turn: "idle", Text: "0"})
	for _, s := range subs {
		require.Equal(t, []string{"0"}, texts(t, s, 1))
	}

	// Their context ends: each channel closes without an error.
	cancel()
	for _, s := range subs {
		for range s.Events() {
		}
		require.NoError(t, s.Err())
	}
	require.Equal(t, 1, live(h, f))
	require.Equal(t, 1, h.Topics())
	first.Close()
	require.Equal(t, 0, h.Topics(), "the last to leave stops the consumer")
}
