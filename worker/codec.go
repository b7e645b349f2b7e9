package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/tollgate-dev/tollgate/storage/codec"
	"github.com/tollgate-dev/tollgate/storage/codec/codecserver"
)

// devCodec is the codec server worker --dev runs for its embedded Web UI
// when payloads are encrypted, so a developer reads turns decrypted there.
type devCodec struct {
	url string
	srv *http.Server
}

// startDevCodec serves the keys TOLLGATE_CODEC_KEYS_FILE names on a
// loopback port; nil when encryption is off. The UI's pages call it from
// the browser, which has no token to pass, so it takes requests without
// one, as the dev gateway does; only the UI's own origin may call from a
// browser, which keeps other web pages out.
func startDevCodec(uiPort int, logger *slog.Logger) (*devCodec, error) {
	keys, err := codec.FromEnv(os.Getenv)
	if err != nil || keys == nil {
		return nil, err
	}
	h, err := codecserver.New(codecserver.Options{
		Codec:           keys,
		Unauthenticated: true,
		UIOrigins:       []string{fmt.Sprintf("http://127.0.0.1:%d", uiPort), fmt.Sprintf("http://localhost:%d", uiPort)},
		Logger:          logger,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the dev codec server: %w", err)
	}
	d := &devCodec{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("Dev codec server stopped", "error", err)
		}
	}()
	logger.Info("Codec server for the Web UI started (loopback, no token)", "endpoint", d.url, "encrypt_key", keys.EncryptKeyID())
	return d, nil
}

// Endpoint is the URL the UI is configured with; empty without a server.
func (d *devCodec) Endpoint() string {
	if d == nil {
		return ""
	}
	return d.url
}

func (d *devCodec) Stop() {
	if d != nil {
		_ = d.srv.Close()
	}
}
