package devserver

import (
	"fmt"
	"net"
	"strconv"

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
// embeds) in the background.
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
	go func() { _ = srv.Start() }()
	return &UI{srv: srv, url: fmt.Sprintf("http://%s", address)}, nil
}
