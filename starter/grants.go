package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/grants"
)

// grantsAPI lists and revokes remembered grants; the Temporal client has
// it.
type grantsAPI interface {
	Grants(ctx context.Context, user string) ([]grants.Grant, error)
	RevokeGrant(ctx context.Context, user, id string) (grants.Grant, error)
}

func (t *temporalTurns) Grants(ctx context.Context, user string) ([]grants.Grant, error) {
	qctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	return tollgate.Client{Temporal: t.c}.Grants(qctx, user)
}

func (t *temporalTurns) RevokeGrant(ctx context.Context, user, id string) (grants.Grant, error) {
	qctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	return tollgate.Client{Temporal: t.c}.RevokeGrant(qctx, user, id)
}

// cmdGrants lists a user's remembered grants (docs/approvals.md) or
// revokes one. Through the gateway, GET /v1/grants and
// DELETE /v1/grants/{id} do the same.
func (c *cli) cmdGrants(ctx context.Context, args []string) error {
	fs := c.flagSet("grants")
	var user string
	fs.StringVar(&user, "user", defaultPerson(c.getenv), "the `user` whose grants these are")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 1, 2, "the subcommand (list or revoke ID)"); err != nil {
		return err
	}
	switch {
	case pos[0] == "list" && len(pos) == 1:
	case pos[0] == "revoke" && len(pos) == 2:
	case pos[0] == "revoke":
		return usagef("revoke needs the grant's id (starter grants list shows them)")
	default:
		return usagef("unknown subcommand %q; use list or revoke ID", strings.Join(pos, " "))
	}
	t, err := c.dial(ctx, c.g)
	if err != nil {
		return err
	}
	defer t.Close()
	api, ok := t.(grantsAPI)
	if !ok {
		return fmt.Errorf("this client cannot reach remembered grants")
	}
	if pos[0] == "revoke" {
		g, err := api.RevokeGrant(ctx, user, pos[1])
		if err != nil {
			return err
		}
		if c.g.json {
			return writeJSON(c.stdout, g)
		}
		fmt.Fprintf(c.stdout, "revoked grant %s of %s (%s); its calls ask again\n", g.ID, user, g.Tool)
		return nil
	}
	gs, err := api.Grants(ctx, user)
	if err != nil {
		return err
	}
	if c.g.json {
		if gs == nil {
			gs = []grants.Grant{}
		}
		return writeJSON(c.stdout, gs)
	}
	if len(gs) == 0 {
		fmt.Fprintf(c.stdout, "%s has no remembered grants\n", user)
		return nil
	}
	for _, g := range gs {
		fmt.Fprintln(c.stdout, grantLine(g))
	}
	return nil
}

// grantLine is one grant on one line: "g-1a2b write user any arguments,
// approved by ann 2026-12-03T10:00:00Z".
func grantLine(g grants.Grant) string {
	scope := string(g.Scope)
	if g.Scope == grants.ScopeSession {
		scope += " " + g.Session
	}
	args := "any arguments"
	if g.ArgsHash != "" {
		args = "these arguments only"
	}
	line := fmt.Sprintf("%s %s %s, %s, approved by %s %s", g.ID, g.Tool, scope, args, g.By, g.At.UTC().Format(time.RFC3339))
	if g.Invalidated != "" {
		line += " [invalidated: " + g.Invalidated + "]"
	}
	return line
}
