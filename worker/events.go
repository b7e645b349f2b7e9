package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/tollgate-dev/tollgate/stream"
)

// liveEvents is where the worker publishes turns' live events and the dev
// gateway reads them: a NATS server named by --nats-url
// (TOLLGATE_NATS_URL), or with --dev and no URL one embedded in this
// process with its data in the data directory. Neither: no live events.
type liveEvents struct {
	nats     *stream.NATS
	embedded *stream.Embedded
	url      string
	// urlFile is where the URL was left for the starter (nats-url in the
	// data directory), removed on Stop.
	urlFile string
}

// publisher is the plugin's stream.Publisher: nil without events, so
// that no typed nil reaches an interface.
func (l *liveEvents) publisher() stream.Publisher {
	if l == nil || l.nats == nil {
		return nil
	}
	return l.nats
}

func (l *liveEvents) source() stream.Source {
	if l == nil || l.nats == nil {
		return nil
	}
	return l.nats
}

func (l *liveEvents) Stop() {
	if l == nil {
		return
	}
	if l.nats != nil {
		l.nats.Close()
	}
	if l.embedded != nil {
		l.embedded.Shutdown()
	}
	if l.urlFile != "" {
		_ = os.Remove(l.urlFile)
	}
}

func openLiveEvents(f flags, logger *slog.Logger) (*liveEvents, error) {
	l := &liveEvents{url: f.natsURL}
	if l.url == "" {
		if !f.dev {
			return nil, nil
		}
		dir := filepath.Join(f.dataDir, "nats")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create the embedded NATS server's directory: %w", err)
		}
		e, err := stream.StartEmbedded(dir, 0)
		if err != nil {
			return nil, fmt.Errorf("start the embedded NATS server (live events): %w", err)
		}
		l.embedded, l.url = e, e.URL()
		logger.Info("Embedded NATS server started", "url", l.url, "data", dir)
	}
	n, err := stream.Connect(stream.Config{URL: l.url, Logger: logger, Name: "tollgate-worker"})
	if err != nil {
		l.Stop()
		return nil, err
	}
	l.nats = n
	// The starter, run beside a dev worker, finds the embedded server's
	// port (a free one, chosen at start) here.
	if l.embedded != nil {
		file := filepath.Join(f.dataDir, "nats-url")
		if err := os.WriteFile(file, []byte(l.url+"\n"), 0o600); err != nil {
			logger.Warn("Cannot leave the NATS URL for the starter; it will poll turns' state instead", "error", err)
		} else {
			l.urlFile = file
		}
	}
	return l, nil
}
