package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	conns "github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/grants"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

type viaAccount struct{ tool.Tool }

func (viaAccount) ConnectionProvider() string { return "tracker" }

// A grant records the user's connection the tool acts through; once the
// user connects again, it does not apply and is marked invalidated.
func TestGrantLapsesWhenTheConnectionChanges(t *testing.T) {
	ctx := context.Background()
	issues := viaAccount{tool.MustFunc(tool.Spec{Name: "issues", Description: "List issues."},
		func(context.Context, tool.Call, struct{}) (results.Outcome, error) {
			return results.SucceedText("ok"), nil
		})}
	reg, err := tool.NewRegistry(issues)
	require.NoError(t, err)
	store := conns.NewMemoryStore()
	require.NoError(t, store.Put(ctx, conns.Credential{Provider: "tracker", User: "ann", Token: "t1", CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}))
	a := &Activities{Tools: reg, Connections: store, Grants: &grants.Memory{}}

	g, err := a.AddGrant(ctx, AddGrantInput{Grant: grants.Grant{ID: "g-1", User: "ann", Scope: grants.ScopeUser, Tool: "issues", By: "bob", Turn: "t", Call: "c"}})
	require.NoError(t, err)
	require.NotEmpty(t, g.ConnectionFingerprint)
	in := LookupGrantsInput{User: "ann", Calls: []GrantedCall{{Tool: "issues", ArgsHash: "h"}}}
	res, err := a.LookupGrants(ctx, in)
	require.NoError(t, err)
	require.Equal(t, "g-1", res.Grants[0].ID)

	require.NoError(t, store.Put(ctx, conns.Credential{Provider: "tracker", User: "ann", Token: "t2", CreatedAt: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}))
	res, err = a.LookupGrants(ctx, in)
	require.NoError(t, err)
	require.Nil(t, res.Grants[0], "connected again: the call asks")
	listed, err := a.Grants.List(ctx, "ann")
	require.NoError(t, err)
	require.Equal(t, "the user's connection for tool issues changed since the grant was made", listed[0].Invalidated)

	_, err = a.AddGrant(ctx, AddGrantInput{Grant: grants.Grant{ID: "g-2", User: "ann", Scope: grants.ScopeUser, Tool: "gone", Turn: "t", Call: "c"}})
	require.ErrorContains(t, err, "tool gone is not offered by this worker now")
}
