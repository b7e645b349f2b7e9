package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrUnavailable is returned by Subscribe when NATS cannot be reached:
// the caller should fall back to polling the turn's state.
var ErrUnavailable = errors.New("live events are unavailable")

// LaggedError ends a subscription whose reader fell too far behind: it
// was closed rather than buffered without bound. Resume with After set
// to ResumeAfter.
type LaggedError struct{ ResumeAfter uint64 }

func (e *LaggedError) Error() string {
	return fmt.Sprintf("the subscriber fell too far behind; resume after event %d", e.ResumeAfter)
}

// Filter selects the events of one turn, of one session (all its turns),
// or with All of every turn. All starts at the newest event, not the
// oldest kept: the whole log is no one's backlog.
type Filter struct {
	Turn    string
	Session string
	All     bool
}

// DefaultBuffer is how many events a subscription holds for a reader that
// is behind; past it, delivery waits for the reader, up to
// Config.SlowReader.
const DefaultBuffer = 64

// Subscription delivers events in order. Read Events until it is closed,
// then Err says why.
type Subscription struct {
	events chan Event
	stall  time.Duration
	stop   func()
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

// Events is closed when the subscription ends.
func (s *Subscription) Events() <-chan Event { return s.events }

// Err is why the subscription ended: nil after Close or a cancelled
// context, a *LaggedError for a reader that fell behind.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription and frees its consumer.
func (s *Subscription) Close() {
	s.stop()
	<-s.done
}

// Subscribe delivers the events that match f with ids after after (0:
// from the first event kept). buffer bounds what is held for a slow
// reader (0: DefaultBuffer); a reader that leaves it full for
// Config.SlowReader is closed with a LaggedError.
func (n *NATS) Subscribe(ctx context.Context, f Filter, after uint64, buffer int) (*Subscription, error) {
	if !n.nc.IsConnected() {
		return nil, ErrUnavailable
	}
	if !n.ready.Load() {
		if err := n.ensure(ctx); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	_, it, err := n.messages(ctx, f, after)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Subscription{events: make(chan Event, buffer), stall: n.cfg.SlowReader, done: make(chan struct{})}
	s.stop = func() {
		cancel()
		it.Stop()
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	go s.run(ctx, it)
	return s, nil
}

// filterSubject is the subject pattern that selects f.
func (n *NATS) filterSubject(f Filter) (string, error) {
	switch {
	case f.Turn != "":
		return n.cfg.Subject + ".*." + token(f.Turn), nil
	case f.Session != "":
		return n.cfg.Subject + "." + token(f.Session) + ".*", nil
	case f.All:
		return n.cfg.Subject + ".>", nil
	default:
		return "", errors.New("stream: subscribe to a turn or a session")
	}
}

// messages reads the events that match f with ids after after through an
// ordered consumer of its own (0: from the first event kept).
func (n *NATS) messages(ctx context.Context, f Filter, after uint64) (jetstream.Consumer, jetstream.MessagesContext, error) {
	subject, err := n.filterSubject(f)
	if err != nil {
		return nil, nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{subject},
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: 30 * time.Second,
	}
	switch {
	case after > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	case f.All:
		// From the next event on, by sequence rather than DeliverNew: the
		// server creates the consumer after this returns, and DeliverNew
		// would miss what is published in between.
		info, err := n.js.Stream(ctx, n.cfg.Stream)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, info.CachedInfo().State.LastSeq+1
	}
	cons, err := n.js.OrderedConsumer(ctx, n.cfg.Stream, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(128))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return cons, it, nil
}

// decode reads an event and its id; ok is false for a message that is
// not an event.
func decode(msg jetstream.Msg) (ev Event, pending uint64, ok bool) {
	data := msg.Data()
	if json.Unmarshal(data, &ev) != nil {
		return Event{}, 0, false
	}
	md, err := msg.Metadata()
	if err != nil {
		return Event{}, 0, false
	}
	ev.ID = md.Sequence.Stream
	// Publishers encode the id as 0, first: the stored JSON with the id
	// put in is the event's encoding, without encoding it again.
	if rest, found := bytes.CutPrefix(data, []byte(`{"id":0,`)); found {
		ev.encoded = append(strconv.AppendUint(append(make([]byte, 0, len(data)+20), `{"id":`...), ev.ID, 10), ',')
		ev.encoded = append(ev.encoded, rest...)
	}
	return ev, md.NumPending, true
}

func (s *Subscription) run(ctx context.Context, it jetstream.MessagesContext) {
	defer close(s.done)
	defer close(s.events)
	var last uint64
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				s.fail(fmt.Errorf("%w: %v", ErrUnavailable, err))
			}
			return
		}
		ev, _, ok := decode(msg)
		if !ok {
			continue
		}
		select {
		case s.events <- ev:
			last = ev.ID
			continue
		default:
		}
		// The reader holds a full buffer. Wait for it a while (the pull
		// from NATS waits meanwhile, so nothing more is held); a reader
		// that takes nothing for that long is closed with where to
		// resume.
		t := time.NewTimer(s.stall)
		select {
		case s.events <- ev:
			t.Stop()
			last = ev.ID
		case <-t.C:
			s.fail(&LaggedError{ResumeAfter: last})
			it.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

func (s *Subscription) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// Source is what watchers subscribe through; *NATS is one.
type Source interface {
	Subscribe(ctx context.Context, f Filter, after uint64, buffer int) (*Subscription, error)
}

var _ Source = (*NATS)(nil)
