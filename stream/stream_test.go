package stream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func embedded(t *testing.T) *Embedded {
	t.Helper()
	e, err := StartEmbedded(t.TempDir(), 0)
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	return e
}

func connect(t *testing.T, url string, cfg Config) *NATS {
	t.Helper()
	cfg.URL = url
	n, err := Connect(cfg)
	require.NoError(t, err)
	t.Cleanup(n.Close)
	return n
}

func next(t *testing.T, s *Subscription) Event {
	t.Helper()
	select {
	case ev, ok := <-s.Events():
		require.True(t, ok, "subscription ended: %v", s.Err())
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
		return Event{}
	}
}

func TestEventsArriveInOrderWithIncreasingIDsAndResume(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{})
	require.True(t, n.Ready())
	ctx := context.Background()

	// Ids with dots and wildcards, which a subject could not hold as they are.
	turn, other := "turn.a*b >c", "turn-other"
	for i := range 5 {
		n.Publish(Event{Type: TypeText, Turn: turn, Session: "s.1", Call: "5", Step: 1, Text: fmt.Sprint(i)})
		n.Publish(Event{Type: TypeText, Turn: other, Text: "not mine"})
	}
	require.NoError(t, n.Flush(ctx))

	s, err := n.Subscribe(ctx, Filter{Turn: turn}, 0, 0)
	require.NoError(t, err)
	defer s.Close()
	var ids []uint64
	for i := range 5 {
		ev := next(t, s)
		require.Equal(t, fmt.Sprint(i), ev.Text)
		require.Equal(t, turn, ev.Turn)
		require.Equal(t, 1, ev.Step)
		require.False(t, ev.Time.IsZero())
		if len(ids) > 0 {
			require.Greater(t, ev.ID, ids[len(ids)-1])
		}
		ids = append(ids, ev.ID)
	}

	// Resuming after the third event gives the fourth and fifth, then live ones.
	r, err := n.Subscribe(ctx, Filter{Turn: turn}, ids[2], 0)
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, ids[3], next(t, r).ID)
	require.Equal(t, ids[4], next(t, r).ID)
	n.Publish(Event{Type: TypeStatus, Turn: turn, Session: "s.1", Status: "completed"})
	live := next(t, r)
	require.Equal(t, TypeStatus, live.Type)
	require.Greater(t, live.ID, ids[4])

	// The session's subscription sees its turns' events, not the others.
	ss, err := n.Subscribe(ctx, Filter{Session: "s.1"}, 0, 0)
	require.NoError(t, err)
	defer ss.Close()
	for range 6 {
		require.Equal(t, turn, next(t, ss).Turn)
	}
}

func TestKeyedEventsAreStoredOnce(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{})
	ctx := context.Background()
	for range 3 {
		n.Publish(Event{Type: TypeStatus, Turn: "t", Status: "running", Key: "t/status/1"})
	}
	n.Publish(Event{Type: TypeStatus, Turn: "t", Status: "completed", Key: "t/status/2"})
	require.NoError(t, n.Flush(ctx))
	s, err := n.Subscribe(ctx, Filter{Turn: "t"}, 0, 0)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "running", next(t, s).Status)
	require.Equal(t, "completed", next(t, s).Status, "the repeated event was dropped by the key")
}

func TestASlowReaderIsClosedWithWhereToResume(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{SlowReader: 100 * time.Millisecond})
	ctx := context.Background()
	for i := range 50 {
		n.Publish(Event{Type: TypeText, Turn: "t", Text: fmt.Sprint(i)})
	}
	require.NoError(t, n.Flush(ctx))
	s, err := n.Subscribe(ctx, Filter{Turn: "t"}, 0, 4)
	require.NoError(t, err)
	defer s.Close()
	// The reader reads nothing until the subscription gave up on it.
	require.Eventually(t, func() bool { return s.Err() != nil }, 10*time.Second, 10*time.Millisecond)
	var got []Event
	for ev := range s.Events() {
		got = append(got, ev)
	}
	require.Len(t, got, 4, "the buffer, never more")
	var lag *LaggedError
	require.True(t, errors.As(s.Err(), &lag), "%v", s.Err())
	require.Equal(t, got[3].ID, lag.ResumeAfter)

	r, err := n.Subscribe(ctx, Filter{Turn: "t"}, lag.ResumeAfter, 0)
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, "4", next(t, r).Text, "resuming continues without a gap")
}

func TestRetentionIsBoundedPerTurn(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{MaxPerTurn: 10})
	ctx := context.Background()
	for i := range 25 {
		n.Publish(Event{Type: TypeText, Turn: "t", Text: fmt.Sprint(i)})
	}
	require.NoError(t, n.Flush(ctx))
	s, err := n.Subscribe(ctx, Filter{Turn: "t"}, 0, 0)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "15", next(t, s).Text, "only the last 10 are kept")
}

// With no server, connecting still works, publishing drops events without
// blocking, and subscribing says the events are unavailable.
func TestNATSDownIsBestEffort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "nats://" + l.Addr().String()
	require.NoError(t, l.Close())

	n := connect(t, url, Config{})
	require.False(t, n.Ready())
	start := time.Now()
	for range 1000 {
		n.Publish(Event{Type: TypeText, Turn: "t", Text: "x"})
	}
	require.Less(t, time.Since(start), 2*time.Second, "publishing must not wait for a server")
	pub, dropped := n.Counts()
	require.Zero(t, pub)
	require.EqualValues(t, 1000, dropped)
	_, err = n.Subscribe(context.Background(), Filter{Turn: "t"}, 0, 0)
	require.ErrorIs(t, err, ErrUnavailable)
}

// A server that comes up after the worker: the connection finds it and
// sets the stream up, so events flow from then on.
func TestAServerStartedLaterIsUsed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	n := connect(t, fmt.Sprintf("nats://127.0.0.1:%d", port), Config{})
	require.False(t, n.Ready())

	e, err := StartEmbedded(t.TempDir(), port)
	require.NoError(t, err)
	t.Cleanup(e.Shutdown)
	require.Eventually(t, n.Ready, 15*time.Second, 50*time.Millisecond)
	n.Publish(Event{Type: TypeText, Turn: "t", Text: "late"})
	s, err := n.Subscribe(context.Background(), Filter{Turn: "t"}, 0, 0)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "late", next(t, s).Text)
}

// A reader that keeps reading catches up a backlog many times its buffer:
// only one that stops is closed.
func TestAReaderThatKeepsReadingCatchesUp(t *testing.T) {
	n := connect(t, embedded(t).URL(), Config{SlowReader: 2 * time.Second})
	ctx := context.Background()
	for i := range 300 {
		n.Publish(Event{Type: TypeText, Turn: "t", Text: fmt.Sprint(i)})
	}
	require.NoError(t, n.Flush(ctx))
	s, err := n.Subscribe(ctx, Filter{Turn: "t"}, 0, 4)
	require.NoError(t, err)
	defer s.Close()
	for i := range 300 {
		if i%50 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		require.Equal(t, fmt.Sprint(i), next(t, s).Text)
	}
	require.NoError(t, s.Err())
}
