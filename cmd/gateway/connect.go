package main

import (
	"context"

	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
)

// connectOptions turns the OAuth connect flow on: the providers file and
// the workers' connection store in the data directory (sealed with the
// payload codec's keys when TOLLGATE_CODEC_KEYS_FILE is set, as the
// workers seal it). The link secret, which must be set, signs connect
// links and states too.
func connectOptions(ctx context.Context, providersFile, linkSecret, dataDir string, getenv func(string) string) (*gateway.ConnectOptions, error) {
	if providersFile == "" {
		return nil, nil
	}
	if linkSecret == "" {
		return nil, usageError{"--oauth-providers needs --link-secret-file: connect links and sign-in states are signed with it"}
	}
	ps, err := oauth.LoadConfig(ctx, providersFile, oauth.LoadOptions{Getenv: getenv})
	if err != nil {
		return nil, err
	}
	store, err := clientconfig.Connections(dataDir, getenv)
	if err != nil {
		return nil, err
	}
	return &gateway.ConnectOptions{Providers: ps, Store: store, PublicURL: getenv("TOLLGATE_GATEWAY_URL")}, nil
}
