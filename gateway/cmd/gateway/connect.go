package main

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/activities/connections"
	"github.com/tollgate-dev/tollgate/activities/connections/oauth"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/links"
	"github.com/tollgate-dev/tollgate/storage/codec"
	"github.com/tollgate-dev/tollgate/storage/datadir"
)

// connectOptions turns the OAuth connect flow on: the providers file, the
// workers' connection store in the data directory (sealed with the
// payload codec's keys when TOLLGATE_CODEC_KEYS_FILE is set, as the
// workers seal it), and the link secret, which signs connect links too.
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
	keys, err := codec.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	var so connections.FileStoreOptions
	if keys != nil {
		so.Sealer = keys
	}
	store, err := connections.NewFileStoreWith(datadir.Connections(dataDir), so)
	if err != nil {
		return nil, fmt.Errorf("open the connections store: %w", err)
	}
	secret, err := links.LoadSecret(linkSecret)
	if err != nil {
		return nil, err
	}
	signer, err := oauth.NewSigner(secret)
	if err != nil {
		return nil, err
	}
	return &gateway.ConnectOptions{Providers: ps, Store: store, Signer: signer, PublicURL: getenv("TOLLGATE_GATEWAY_URL")}, nil
}
