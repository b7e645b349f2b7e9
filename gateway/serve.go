package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// NewHTTPServer is the http.Server every gateway is served with, the
// standalone one (Serve) and the one `worker --dev` runs: its timeouts,
// so a slow or idle client cannot hold a connection open, and l's port
// as the one the Host check (Options.Hosts) expects.
func (s *Server) NewHTTPServer(l net.Listener) *http.Server {
	if _, port, err := net.SplitHostPort(l.Addr().String()); err == nil {
		s.listenPort.Store(&port)
	}
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A response may wait RespondTimeout for a worker, and a list as
		// long for its state queries.
		WriteTimeout:   s.opts.RespondTimeout + 30*time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
	}
}

// ListenAndServe serves on Options.Addr until ctx ends, then stops taking
// requests and gives those in flight a few seconds to finish. With
// certFile and keyFile it serves HTTPS (session cookies are then Secure).
func (s *Server) ListenAndServe(ctx context.Context, certFile, keyFile string) error {
	l, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w", s.opts.Addr, err)
	}
	return s.Serve(ctx, l, certFile, keyFile)
}

// Serve is ListenAndServe on a listener the caller opened (port 0 in
// tests). In dev mode the listener must be on a loopback address.
func (s *Server) Serve(ctx context.Context, l net.Listener, certFile, keyFile string) error {
	if s.opts.Dev {
		if err := CheckLoopback(l.Addr().String()); err != nil {
			l.Close()
			return fmt.Errorf("gateway: dev mode serves only on loopback: %w", err)
		}
	}
	srv := s.NewHTTPServer(l)
	done := make(chan error, 1)
	go func() {
		if certFile != "" || keyFile != "" {
			done <- srv.ServeTLS(l, certFile, keyFile)
			return
		}
		done <- srv.Serve(l)
	}()
	select {
	case err := <-done:
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("gateway: shut down: %w", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("gateway: serve: %w", err)
	}
	return nil
}
