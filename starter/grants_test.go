package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/grants"
	"github.com/tollgate-dev/tollgate/workflows"
)

// grantTurns is a fake client that also keeps grants.
type grantTurns struct {
	*fakeTurns
	store *grants.Memory
}

func (g grantTurns) Grants(ctx context.Context, user string) ([]grants.Grant, error) {
	return g.store.List(ctx, user)
}

func (g grantTurns) RevokeGrant(ctx context.Context, user, id string) (grants.Grant, error) {
	return g.store.Revoke(ctx, user, id)
}

func TestGrantsListAndRevoke(t *testing.T) {
	store := &grants.Memory{}
	_, err := store.Add(context.Background(), "", grants.Grant{ID: "g-1", User: "ann", Scope: grants.ScopeUser, Tool: "write_file",
		ToolFingerprint: "fp", ArgsHash: "h", By: "bob", At: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), Turn: "t", Call: "c",
		Invalidated: "tool write_file changed its definition since the grant was made"})
	require.NoError(t, err)
	h := newHarness(t, nil)
	h.dialFn = func() (turns, error) { return grantTurns{fakeTurns: newFake(workflows.State{}), store: store}, nil }

	out := h.run("", "grants", "list", "--user", "ann")
	require.Equal(t, 0, out.code, out.stderr)
	require.Equal(t, "g-1 write_file user, these arguments only, approved by bob 2026-12-03T10:00:00Z [invalidated: tool write_file changed its definition since the grant was made]\n", out.stdout)

	out = h.run("", "grants", "revoke", "g-2", "--user", "ann")
	require.Equal(t, 1, out.code)
	require.Contains(t, out.stderr, `user ann has no grant "g-2"`)
	out = h.run("", "grants", "revoke", "--user", "ann")
	require.Equal(t, 2, out.code)
	require.Contains(t, out.stderr, "revoke needs the grant's id")

	out = h.run("", "grants", "revoke", "g-1", "--user", "ann")
	require.Equal(t, 0, out.code, out.stderr)
	require.Equal(t, "revoked grant g-1 of ann (write_file); its calls ask again\n", out.stdout)
	out = h.run("", "grants", "list", "--user", "ann")
	require.Equal(t, "ann has no remembered grants\n", out.stdout)
}
