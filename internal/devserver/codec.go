package devserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/storage/codec"
	"github.com/tollgate-dev/tollgate/storage/codec/codecserver"
)

// CodecOptions configure the codec server for the embedded Web UI.
type CodecOptions struct {
	// Keys decrypt what the UI shows and encrypt what it sends.
	Keys *codec.Keyring
	// UIPort is the port of the embedded UI on loopback: only its origin
	// may call from a browser.
	UIPort int
	// Logger; nil discards.
	Logger *slog.Logger
}

// Codec is a running codec server for the embedded UI.
type Codec struct {
	url string
	srv *http.Server
}

// StartCodec serves opts.Keys on a loopback port, for the UI that
// `worker --dev` embeds, so a developer reads turns decrypted there. The
// UI's pages call it from the browser, which has no token to pass, so it
// takes requests without one, as the dev gateway does; only the UI's own
// origin may call from a browser, which keeps other web pages out.
func StartCodec(opts CodecOptions) (*Codec, error) {
	if opts.Keys == nil {
		return nil, errors.New("devserver: the codec server needs keys")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h, err := codecserver.New(codecserver.Options{
		Codec:           opts.Keys,
		Unauthenticated: true,
		UIOrigins:       []string{fmt.Sprintf("http://127.0.0.1:%d", opts.UIPort), fmt.Sprintf("http://localhost:%d", opts.UIPort)},
		Logger:          logger,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the dev codec server: %w", err)
	}
	c := &Codec{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := c.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("Dev codec server stopped", "error", err)
		}
	}()
	logger.Info("Codec server for the Web UI started (loopback, no token)", "endpoint", c.url, "encrypt_key", opts.Keys.EncryptKeyID())
	return c, nil
}

// Endpoint is the URL the UI is configured with (UIOptions.CodecEndpoint);
// empty without a server.
func (c *Codec) Endpoint() string {
	if c == nil {
		return ""
	}
	return c.url
}

// Stop stops the server; a nil Codec is a no-op, so callers need not
// check whether encryption is on.
func (c *Codec) Stop() {
	if c != nil {
		_ = c.srv.Close()
	}
}
