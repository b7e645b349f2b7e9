package main

import (
	"context"

	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
)

// connectOptions turns the OAuth connect flow on: the providers file
// and, with mcpOAuth, the providers the workers discovered for MCP
// servers (the registry in the data directory), and the workers'
// connection store there (both sealed with the payload codec's keys when
// TOLLGATE_CODEC_KEYS_FILE is set, as the workers seal them). The link
// secret, which must be set, signs connect links and states too.
func connectOptions(ctx context.Context, providersFile string, mcpOAuth bool, linkSecret, dataDir string, getenv func(string) string) (*gateway.ConnectOptions, error) {
	if providersFile == "" && !mcpOAuth {
		return nil, nil
	}
	if linkSecret == "" {
		return nil, usageError{"--oauth-providers and --mcp-oauth need --link-secret-file: connect links and sign-in states are signed with it"}
	}
	var ps *oauth.Providers
	if providersFile != "" {
		var err error
		if ps, err = oauth.LoadConfig(ctx, providersFile, oauth.LoadOptions{Getenv: getenv}); err != nil {
			return nil, err
		}
	}
	if mcpOAuth {
		reg, err := clientconfig.OAuthRegistry(dataDir, getenv)
		if err != nil {
			return nil, err
		}
		// Configured providers win on a shared id.
		ps = ps.WithRegistry(reg, nil)
	}
	store, err := clientconfig.Connections(dataDir, getenv)
	if err != nil {
		return nil, err
	}
	return &gateway.ConnectOptions{Providers: ps, Store: store, PublicURL: getenv("TOLLGATE_GATEWAY_URL")}, nil
}
