package devserver

import (
	"fmt"
	"net"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// UIOptions configure the embedded Temporal Web UI.
type UIOptions struct {
	// IP and Port to serve on; defaults 127.0.0.1:8233, as the official
	// CLI's dev server does.
	IP   string
	Port int
	// TemporalAddress is the frontend the UI talks to.
	TemporalAddress string
	// CodecEndpoint, when set, is the codec server the UI's pages call to
	// show encrypted payloads decrypted (see storage/codec/codecserver).
	CodecEndpoint string
}

// UI is a running Web UI.
type UI struct {
	srv *uiserver.Server
	url string
}

// URL is where a browser finds the UI.
func (u *UI) URL() string { return u.url }

// Stop stops the UI.
func (u *UI) Stop() { u.srv.Stop() }

// StartUI serves the Temporal Web UI (the same module the official CLI
// embeds) in the background, and returns once it listens.
func StartUI(opts UIOptions) (*UI, error) {
	if opts.IP == "" {
		opts.IP = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = 8233
	}
	address := net.JoinHostPort(opts.IP, strconv.Itoa(opts.Port))
	// The UI server exits the process when it cannot listen, so check first.
	if err := portFree(address); err != nil {
		return nil, err
	}
	srv := uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
		Host:                opts.IP,
		Port:                opts.Port,
		TemporalGRPCAddress: opts.TemporalAddress,
		EnableUI:            true,
		DefaultNamespace:    "default",
		HideLogs:            true,
		DisableNewsFetch:    true,
		Distribution:        "tollgate",
		CORS:                uiconfig.CORS{CookieInsecure: true},
		Codec:               uiconfig.Codec{Endpoint: opts.CodecEndpoint},
	}))
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Start() }()
	// Start listens only once its goroutine runs; a browser sent to the
	// URL before then is refused.
	if err := awaitListening(address, stopped, uiListenTimeout); err != nil {
		srv.Stop()
		return nil, fmt.Errorf("start the Temporal Web UI on %s: %w", address, err)
	}
	return &UI{srv: srv, url: fmt.Sprintf("http://%s", address)}, nil
}

// uiListenTimeout bounds the wait for the UI's listener: it binds a port
// checked free a moment before, so only a starved machine takes long.
const uiListenTimeout = 30 * time.Second

// awaitListening returns once address accepts connections, or fails when
// the server stops first or timeout passes.
func awaitListening(address string, stopped <-chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", address, time.Second)
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens after %s: %w", timeout, err)
		}
		select {
		case err := <-stopped:
			return fmt.Errorf("the server stopped before it listened: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
