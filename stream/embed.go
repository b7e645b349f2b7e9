package stream

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Embedded is a NATS server with JetStream inside this process, for
// `worker --dev` and tests.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts a NATS server that listens on 127.0.0.1 (port 0
// picks a free one) and keeps its JetStream data in dir.
func StartEmbedded(dir string, port int) (*Embedded, error) {
	if port == 0 {
		port = -1
	}
	srv, err := server.NewServer(&server.Options{
		ServerName:         "tollgate-dev",
		Host:               "127.0.0.1",
		Port:               port,
		JetStream:          true,
		StoreDir:           dir,
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  1 << 30,
		NoSigs:             true,
		NoLog:              true,
		MaxPayload:         DefaultMaxEventBytes * 2,
	})
	if err != nil {
		return nil, fmt.Errorf("stream: configure the embedded NATS server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(15 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("stream: the embedded NATS server did not start within 15s")
	}
	return &Embedded{srv: srv}, nil
}

// URL is where clients connect.
func (e *Embedded) URL() string { return e.srv.ClientURL() }

// Shutdown stops the server and waits for it.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
