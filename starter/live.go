package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/stream"
)

// Live text: while a turn runs, watch, chat and run --interactive print
// the model's text as it streams, from the workers' NATS
// (TOLLGATE_NATS_URL, or the URL `worker --dev` leaves in the data
// directory's nats-url file). Card changes come from the stream too: each
// is printed as it arrives and makes the follower query the state at
// once (for the prompts of run --interactive and chat), and the state is
// then polled only every livePoll, as a fallback. Without NATS, polling
// every poll interval does it all.

// NATSURLFile is where `worker --dev` writes its embedded NATS server's
// URL, inside the data directory.
const NATSURLFile = "nats-url"

// liveWait is how long the starter waits for NATS before polling alone.
var liveWait = time.Second

// livePollFactor slows polling while the stream is live: the poll is then
// only the fallback for events NATS lost.
const livePollFactor = 10

func (c *cli) natsURL() string {
	if u := c.getenv("TOLLGATE_NATS_URL"); u != "" {
		return u
	}
	b, err := os.ReadFile(filepath.Join(c.g.dataDir, NATSURLFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// liveText starts printing turn id's streamed text to stdout, and its
// card changes through p, and returns a function that stops it and says
// what text it printed. Under --json, or without a reachable NATS, it
// prints nothing. While it runs, c.nudge is set: follow queries the state
// when a card changes.
func (c *cli) liveText(ctx context.Context, id string, p *printer) func() string {
	url := c.natsURL()
	if c.g.json || url == "" {
		return func() string { return "" }
	}
	n, err := stream.Connect(stream.Config{URL: url, Logger: discardLogger(), Name: "tollgate-starter"})
	if err != nil {
		return func() string { return "" }
	}
	deadline := time.Now().Add(liveWait)
	for !n.Ready() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !n.Ready() {
		n.Close()
		return func() string { return "" }
	}
	sub, err := n.Subscribe(ctx, stream.Filter{Turn: id}, 0, 0)
	if err != nil {
		n.Close()
		return func() string { return "" }
	}
	out := &liveWriter{w: c.stdout}
	prev := c.stdout
	c.stdout = out
	nudge := make(chan struct{}, 1)
	c.nudge = nudge
	var text strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		call := ""
		for ev := range sub.Events() {
			switch ev.Type {
			case stream.TypeText:
				if ev.Call != call {
					call = ev.Call
					out.endLine()
					out.live("» ")
				}
				text.WriteString(ev.Text)
				out.live(ev.Text)
			case stream.TypeReset:
				out.live("\n  (the model call is retried; its reply starts again)\n")
				text.Reset()
				call = ""
			case stream.TypeCard:
				if ev.Card != nil {
					p.card(*ev.Card)
				}
				select {
				case nudge <- struct{}{}:
				default:
				}
			case stream.TypeResult:
				out.endLine()
				return
			}
		}
	}()
	return func() string {
		// The turn's result event comes before its workflow ends; give
		// the text still on its way a moment to arrive.
		select {
		case <-done:
		case <-time.After(liveWait):
		}
		sub.Close()
		<-done
		n.Close()
		out.endLine()
		c.stdout = prev
		c.nudge = nil
		return text.String()
	}
}

// liveWriter lets streamed text and whole lines share stdout: a line
// written while streamed text is mid-line starts on a line of its own.
type liveWriter struct {
	mu  sync.Mutex
	w   io.Writer
	mid bool
	// resumed: a line broke into streamed text, which goes on with a
	// fresh "» " on the next line.
	resumed bool
}

func (l *liveWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mid {
		_, _ = io.WriteString(l.w, "\n")
		l.mid, l.resumed = false, true
	}
	return l.w.Write(p)
}

func (l *liveWriter) live(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == "" {
		return
	}
	if l.resumed && s != "» " {
		_, _ = io.WriteString(l.w, "» ")
	}
	l.resumed = false
	_, _ = io.WriteString(l.w, s)
	l.mid = !strings.HasSuffix(s, "\n")
}

func (l *liveWriter) endLine() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resumed = false
	if l.mid {
		_, _ = io.WriteString(l.w, "\n")
		l.mid = false
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
