package main

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
)

// openConnections opens the connection store of the data directory and,
// with --oauth-providers or MCP's authorization flow on, wraps it so that
// expired OAuth tokens are refreshed before a tool reads them. The
// providers (with the registry of those discovered for MCP servers) are
// returned for the dev gateway's connect flow.
func openConnections(ctx context.Context, f flags, auth *mcp.OAuth, logger *slog.Logger) (connections.Store, *oauth.Providers, error) {
	// With the payload codec's keys (TOLLGATE_CODEC_KEYS_FILE), tokens
	// are sealed at rest with them too.
	base, err := clientconfig.Connections(f.dataDir, os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	if f.oauthProviders == "" && auth == nil {
		return base, nil, nil
	}
	var ps *oauth.Providers
	if f.oauthProviders != "" {
		if ps, err = oauth.LoadConfig(ctx, f.oauthProviders, oauth.LoadOptions{}); err != nil {
			return nil, nil, err
		}
		logger.Info("OAuth providers ready", "config", f.oauthProviders, "providers", ps.IDs())
	}
	if auth != nil {
		// A discovered provider's tokens are refreshed like a configured
		// one's.
		ps = ps.WithRegistry(auth.Registry, nil)
	}
	s := oauth.NewStore(base, ps)
	s.Logger = logger
	return s, ps, nil
}

// mcpOAuth is MCP's authorization flow as this worker runs it: on with
// --oauth-redirect-base (in --dev, the dev gateway's address), with the
// registry of discovered providers in the data directory, which the
// gateway reads (cmd/gateway --mcp-oauth). Nil when off.
func mcpOAuth(f flags) (*mcp.OAuth, error) {
	base := f.oauthRedirectBase
	if base == "" && f.dev && f.gatewayAddr != "" {
		base = "http://" + f.gatewayAddr
	}
	if base == "" {
		return nil, nil
	}
	reg, err := clientconfig.OAuthRegistry(f.dataDir, os.Getenv)
	if err != nil {
		return nil, err
	}
	return &mcp.OAuth{Registry: reg, Client: oauth.MCPClient{
		RedirectURL: strings.TrimRight(base, "/") + oauth.CallbackPath,
		ClientName:  "Tollgate",
	}}, nil
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
