package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
)

// openConnections opens the connection store of the data directory and,
// with --oauth-providers, wraps it so that expired OAuth tokens are
// refreshed before a tool reads them. The providers are returned for the
// dev gateway's connect flow.
func openConnections(ctx context.Context, f flags, logger *slog.Logger) (connections.Store, *oauth.Providers, error) {
	// With the payload codec's keys (TOLLGATE_CODEC_KEYS_FILE), tokens
	// are sealed at rest with them too.
	base, err := clientconfig.Connections(f.dataDir, os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	if f.oauthProviders == "" {
		return base, nil, nil
	}
	ps, err := oauth.LoadConfig(ctx, f.oauthProviders, oauth.LoadOptions{})
	if err != nil {
		return nil, nil, err
	}
	logger.Info("OAuth providers ready", "config", f.oauthProviders, "providers", ps.IDs())
	s := oauth.NewStore(base, ps)
	s.Logger = logger
	return s, ps, nil
}

// devConnect is the dev gateway's OAuth configuration: the providers and
// the store the worker's tools read. Connect links and states are signed
// by the gateway's link signer (devLinkSigner).
func devConnect(store connections.Store, ps *oauth.Providers) *gateway.ConnectOptions {
	if ps == nil {
		return nil
	}
	return &gateway.ConnectOptions{Providers: ps, Store: store}
}
