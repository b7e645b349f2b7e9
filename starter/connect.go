package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
)

// cmdConnect stores a user's credential for a provider in the connection
// store of the data directory, the one a worker sharing that directory
// reads (make run shares it). It is the dev stand-in for an OAuth flow:
// after it, `starter connected ID CALL` runs the waiting tool again.
func (c *cli) cmdConnect(ctx context.Context, args []string) error {
	fs := c.flagSet("connect")
	var user, tokenEnv string
	var scopes string
	fs.StringVar(&user, "user", defaultPerson(c.getenv), "the `user` the turn runs for (run --user)")
	fs.StringVar(&tokenEnv, "token-env", "", "read the token from this environment `variable` instead of standard input")
	fs.StringVar(&scopes, "scopes", "", "comma-separated `scopes` the token grants")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 1, 1, "PROVIDER"); err != nil {
		return err
	}
	provider := pos[0]
	token, err := c.readToken(tokenEnv)
	if err != nil {
		return err
	}
	store, err := clientconfig.Connections(c.g.dataDir, c.getenv)
	if err != nil {
		return err
	}
	cred := connections.Credential{Provider: provider, User: user, Token: token}
	for _, s := range strings.Split(scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cred.Scopes = append(cred.Scopes, s)
		}
	}
	if err := store.Put(ctx, cred); err != nil {
		return fmt.Errorf("store the %s connection for %s: %w", provider, user, err)
	}
	if c.g.json {
		return writeJSON(c.stdout, map[string]string{"provider": provider, "user": user})
	}
	fmt.Fprintf(c.stdout, "stored a %s connection for %s in %s; now tell waiting calls: starter connected ID CALL\n", provider, user, c.g.dataDir)
	return nil
}

// readToken never takes the token as an argument: arguments end up in
// shell history and process listings.
func (c *cli) readToken(env string) (string, error) {
	if env != "" {
		v := strings.TrimSpace(c.getenv(env))
		if v == "" {
			return "", usagef("environment variable %s is empty", env)
		}
		return v, nil
	}
	fmt.Fprintln(c.stderr, "token (read from standard input, one line):")
	line, err := bufio.NewReader(c.stdin).ReadString('\n')
	line = strings.TrimSpace(line)
	if line == "" {
		if err != nil {
			return "", usagef("no token on standard input: %v", err)
		}
		return "", usagef("the token is empty")
	}
	return line, nil
}
