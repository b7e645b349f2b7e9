package main

import (
	"context"
	"fmt"

	"github.com/tollgate-dev/tollgate/internal/clientconfig"
	"github.com/tollgate-dev/tollgate/storage/codec"
)

// cmdConnections is `starter connections migrate`: it seals, in place,
// the plain credential files of the data directory's connection store.
// A store that seals refuses plain files (one could have been planted),
// so turning encryption on for a store that already holds tokens takes
// this one deliberate step.
func (c *cli) cmdConnections(ctx context.Context, args []string) error {
	fs := c.flagSet("connections")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 1, 1, "the subcommand (migrate)"); err != nil {
		return err
	}
	if pos[0] != "migrate" {
		return usagef("unknown subcommand %q; the only one is migrate", pos[0])
	}
	keys, err := codec.FromEnv(c.getenv)
	if err != nil {
		return err
	}
	if keys == nil {
		return usagef("%s is not set: there is no key to seal the connection store with", codec.EnvKeysFile)
	}
	store, err := clientconfig.Connections(c.g.dataDir, c.getenv)
	if err != nil {
		return err
	}
	sealed, err := store.SealPlainFiles(ctx)
	if c.g.json {
		if werr := writeJSON(c.stdout, map[string]any{"sealed": sealed}); werr != nil {
			return werr
		}
	} else {
		for _, name := range sealed {
			fmt.Fprintf(c.stdout, "sealed %s\n", name)
		}
		if len(sealed) == 0 && err == nil {
			fmt.Fprintf(c.stdout, "no plain credential files in %s; nothing to seal\n", c.g.dataDir)
		}
	}
	if err != nil {
		return fmt.Errorf("seal the connection store in %s: %w", c.g.dataDir, err)
	}
	return nil
}
