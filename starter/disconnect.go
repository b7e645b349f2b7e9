package main

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
)

// cmdDisconnect forgets a user's connection to a provider in the data
// directory's store and, when the provider is in the OAuth providers file
// and has a revocation endpoint, revokes the token there first. A tool
// that needs the provider then asks for the connection again. Through
// the gateway, DELETE /v1/connections/{provider} does the same.
func (c *cli) cmdDisconnect(ctx context.Context, args []string) error {
	fs := c.flagSet("disconnect")
	var user, providers string
	fs.StringVar(&user, "user", defaultPerson(c.getenv), "the `user` whose connection goes")
	fs.StringVar(&providers, "oauth-providers", c.getenv(oauth.EnvConfig), "OAuth providers `file`, to revoke the token at the provider (TOLLGATE_OAUTH_PROVIDERS)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 1, 1, "PROVIDER"); err != nil {
		return err
	}
	provider := pos[0]
	store, err := clientconfig.Connections(c.g.dataDir, c.getenv)
	if err != nil {
		return err
	}
	var ps *oauth.Providers
	if providers != "" {
		if ps, err = oauth.LoadConfig(ctx, providers, oauth.LoadOptions{Getenv: c.getenv}); err != nil {
			return err
		}
	}
	had, err := oauth.Disconnect(ctx, store, ps, user, provider)
	if err != nil && !had {
		return fmt.Errorf("disconnect %s for %s: %w", provider, user, err)
	}
	if c.g.json {
		return writeJSON(c.stdout, map[string]any{"provider": provider, "user": user, "disconnected": had})
	}
	switch {
	case !had:
		fmt.Fprintf(c.stdout, "%s has no %s connection in %s\n", user, provider, c.g.dataDir)
	case err != nil:
		fmt.Fprintf(c.stdout, "forgot the %s connection of %s; %v\n", provider, user, err)
	default:
		fmt.Fprintf(c.stdout, "disconnected %s for %s\n", provider, user)
	}
	return nil
}
