package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Filter selects the events of one turn or of one session (all its turns).
type Filter struct {
	Turn    string
	Session string
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
	var subject string
	switch {
	case f.Turn != "":
		subject = n.cfg.Subject + ".*." + token(f.Turn)
	case f.Session != "":
		subject = n.cfg.Subject + "." + token(f.Session) + ".*"
	default:
		return nil, errors.New("stream: subscribe to a turn or a session")
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{subject},
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: 30 * time.Second,
	}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := n.js.OrderedConsumer(ctx, n.cfg.Stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(128))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
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
		var ev Event
		if json.Unmarshal(msg.Data(), &ev) != nil {
			continue
		}
		if md, err := msg.Metadata(); err == nil {
			ev.ID = md.Sequence.Stream
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
