// Command codec-server serves Tollgate's payload codec to the Temporal
// Web UI and CLI, so operators read decrypted turns there:
//
//	codec-server --keys-file keys --token-file token --ui-origin http://localhost:8233
//	temporal workflow show -w <id> --codec-endpoint http://127.0.0.1:8089 --codec-auth "Bearer $(cat token)"
//
// --new-key <id> prints a fresh keys file line and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-dev/tollgate/storage/codec"
	"github.com/tollgate-dev/tollgate/storage/codec/codecserver"
)

func main() {
	var (
		addr       = flag.String("addr", "127.0.0.1:8089", "listen address")
		keysFile   = flag.String("keys-file", os.Getenv(codec.EnvKeysFile), "keys file, one `id:base64` a line, the first encrypts ("+codec.EnvKeysFile+")")
		tokenFile  = flag.String("token-file", os.Getenv("TOLLGATE_CODEC_TOKEN_FILE"), "bearer tokens callers must present, one a line (TOLLGATE_CODEC_TOKEN_FILE)")
		uiOrigin   = flag.String("ui-origin", "http://localhost:8233", "origins of the Web UIs allowed to call from a browser, comma-separated (scheme://host:port)")
		namespaces = flag.String("namespaces", "", "comma-separated namespaces served; a request must name one in X-Namespace. Empty serves all")
		tlsCert    = flag.String("tls-cert", "", "TLS certificate file (a UI served over https needs an https codec endpoint)")
		tlsKey     = flag.String("tls-key", "", "TLS key file")
		newKey     = flag.String("new-key", "", "print a new keys file line with this `id` and exit")
	)
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *newKey != "" {
		k, err := codec.NewKey(*newKey)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(k.Line())
		return
	}
	if err := run(*addr, *keysFile, *tokenFile, split(*uiOrigin), split(*namespaces), *tlsCert, *tlsKey, logger); err != nil {
		logger.Error("Codec server stopped", "error", err)
		os.Exit(1)
	}
}

func run(addr, keysFile, tokenFile string, origins, namespaces []string, cert, key string, logger *slog.Logger) error {
	if keysFile == "" {
		return fmt.Errorf("no keys: set --keys-file or %s", codec.EnvKeysFile)
	}
	if tokenFile == "" {
		return errors.New("no token file: set --token-file or TOLLGATE_CODEC_TOKEN_FILE (make one with `openssl rand -hex 32 > token`)")
	}
	keys, err := codec.LoadFile(keysFile)
	if err != nil {
		return err
	}
	tokens, err := codecserver.LoadTokens(tokenFile)
	if err != nil {
		return err
	}
	h, err := codecserver.New(codecserver.Options{Codec: keys, Tokens: tokens, UIOrigins: origins, Namespaces: namespaces, Logger: logger})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	scheme := "http"
	if cert != "" {
		scheme = "https"
	}
	logger.Info("Codec server ready", "endpoint", scheme+"://"+ln.Addr().String(), "encrypt_key", keys.EncryptKeyID(), "ui_origins", strings.Join(origins, ","))
	if cert != "" {
		err = srv.ServeTLS(ln, cert, key)
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
