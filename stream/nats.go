package stream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults for Config: events are kept an hour, at most MaxPerTurn of
// them for one turn (a long reply is a few thousand), and the whole log
// is bounded in bytes so a flood of turns cannot fill the disk.
const (
	DefaultStream     = "TOLLGATE_EVENTS"
	DefaultSubject    = "tollgate.events"
	DefaultMaxAge     = time.Hour
	DefaultMaxBytes   = 512 << 20
	DefaultMaxPerTurn = 50_000
	// DefaultMaxEventBytes bounds one event; a card carries at most 64 KiB
	// of inline output, plus its arguments.
	DefaultMaxEventBytes = 512 << 10
	// dedupeWindow is how long JetStream remembers event keys: longer
	// than a workflow task takes to be retried on another worker.
	dedupeWindow = 5 * time.Minute
	// DefaultSlowReader: a watcher that takes no event for this long while
	// events wait is too far behind.
	DefaultSlowReader = 5 * time.Second
)

// Config says where events go and how long they are kept.
type Config struct {
	// URL is the NATS server (or a comma-separated list of cluster members).
	URL string
	// Stream and Subject name the JetStream stream and its subject prefix;
	// empty means DefaultStream and DefaultSubject.
	Stream  string
	Subject string
	// MaxAge, MaxBytes, MaxPerTurn and MaxEventBytes bound retention; zero
	// means the default.
	MaxAge        time.Duration
	MaxBytes      int64
	MaxPerTurn    int64
	MaxEventBytes int32
	// Replicas is the stream's replica count on a cluster; zero means 1.
	Replicas int
	// Logger receives connection changes; nil means slog.Default().
	Logger *slog.Logger
	// Name is how the connection shows in the server's monitoring.
	Name string
	// SlowReader is how long a subscriber may leave its full buffer
	// untouched before it is closed with a LaggedError; zero means
	// DefaultSlowReader.
	SlowReader time.Duration
}

func (c *Config) defaults() {
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Subject == "" {
		c.Subject = DefaultSubject
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxPerTurn == 0 {
		c.MaxPerTurn = DefaultMaxPerTurn
	}
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = DefaultMaxEventBytes
	}
	if c.SlowReader == 0 {
		c.SlowReader = DefaultSlowReader
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// NATS publishes and subscribes to turn events on a NATS server with
// JetStream. It is safe for concurrent use.
type NATS struct {
	cfg Config
	nc  *nats.Conn
	js  jetstream.JetStream

	// init is closed once nc and js are set; connection callbacks that
	// fire before that wait for it.
	init      chan struct{}
	ready     atomic.Bool
	ensuring  sync.Mutex
	published atomic.Int64
	dropped   atomic.Int64
}

var _ Publisher = (*NATS)(nil)

// Connect returns a NATS for cfg. A server that cannot be reached now is
// not an error: the connection keeps trying in the background, events
// published meanwhile are dropped, and subscribing fails with
// ErrUnavailable until it is back.
func Connect(cfg Config) (*NATS, error) {
	cfg.defaults()
	if cfg.URL == "" {
		return nil, errors.New("stream: no NATS URL")
	}
	n := &NATS{cfg: cfg, init: make(chan struct{})}
	nc, err := nats.Connect(cfg.URL,
		nats.Name(cfg.Name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		// While disconnected, what would be buffered is dropped instead:
		// late tokens are worth less than a bounded worker.
		nats.ReconnectBufSize(-1),
		nats.ConnectHandler(func(*nats.Conn) { n.ensureAsync() }),
		nats.ReconnectHandler(func(*nats.Conn) { n.ensureAsync() }),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			n.ready.Store(false)
			if err != nil && !c.IsClosed() {
				cfg.Logger.Warn("Live events: NATS connection lost; turns go on, their events are dropped until it is back", "error", err)
			}
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("stream: connect to NATS: %w", err)
	}
	n.nc = nc
	if n.js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("stream: JetStream: %w", err)
	}
	close(n.init)
	if nc.IsConnected() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := n.ensure(ctx); err != nil {
			cfg.Logger.Warn("Live events: the event stream could not be set up; retrying on the next reconnect", "error", err)
		}
	}
	return n, nil
}

// Close closes the connection after sending what is buffered.
func (n *NATS) Close() {
	_ = n.nc.Drain()
}

// Ready reports whether the server is connected and the stream exists.
func (n *NATS) Ready() bool { return n.ready.Load() && n.nc.IsConnected() }

// Counts reports how many events were handed to the connection and how
// many were dropped, since Connect.
func (n *NATS) Counts() (published, dropped int64) {
	return n.published.Load(), n.dropped.Load()
}

func (n *NATS) ensureAsync() {
	go func() {
		<-n.init
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.ensure(ctx); err != nil && !n.nc.IsClosed() {
			n.cfg.Logger.Warn("Live events: the event stream could not be set up", "error", err)
		}
	}()
}

// ensure creates the stream, or updates its limits to the configured ones.
func (n *NATS) ensure(ctx context.Context) error {
	n.ensuring.Lock()
	defer n.ensuring.Unlock()
	_, err := n.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              n.cfg.Stream,
		Description:       "Tollgate live turn events",
		Subjects:          []string{n.cfg.Subject + ".>"},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxAge:            n.cfg.MaxAge,
		MaxBytes:          n.cfg.MaxBytes,
		MaxMsgsPerSubject: n.cfg.MaxPerTurn,
		MaxMsgSize:        n.cfg.MaxEventBytes,
		Duplicates:        min(dedupeWindow, n.cfg.MaxAge),
		Replicas:          n.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("create stream %s: %w", n.cfg.Stream, err)
	}
	n.ready.Store(true)
	return nil
}

// token encodes an id as one subject token: ids may hold dots, spaces or
// wildcards, which subjects cannot.
func token(id string) string {
	if id == "" {
		return "-"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(id))
}

// subject is where a turn's events go: <prefix>.<session>.<turn>, with
// "-" for a turn outside a session, so that both a turn and a whole
// session are one filter.
func (n *NATS) subject(session, turn string) string {
	return n.cfg.Subject + "." + token(session) + "." + token(turn)
}

// Publish sends ev without waiting for the server. It fills in the time.
func (n *NATS) Publish(ev Event) {
	if !n.Ready() {
		n.dropped.Add(1)
		return
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	ev.ID = 0
	data, err := json.Marshal(ev)
	if err != nil || len(data) > int(n.cfg.MaxEventBytes) {
		n.dropped.Add(1)
		return
	}
	msg := nats.NewMsg(n.subject(ev.Session, ev.Turn))
	msg.Data = data
	if ev.Key != "" {
		msg.Header.Set(jetstream.MsgIDHeader, ev.Key)
	}
	if err := n.nc.PublishMsg(msg); err != nil {
		n.dropped.Add(1)
		return
	}
	n.published.Add(1)
}

// Flush waits until the server has every event published so far; tests
// and the end of a turn use it.
func (n *NATS) Flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	return n.nc.FlushWithContext(ctx)
}
