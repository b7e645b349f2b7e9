package tollgate

import (
	"context"

	"github.com/tollgate-dev/tollgate/grants"
)

// Grants lists the remembered grants of user (docs/approvals.md,
// "Remembered grants"), oldest first, invalidated ones included.
func (c Client) Grants(ctx context.Context, user string) ([]grants.Grant, error) {
	return grants.Workflows{Client: c.Temporal}.List(ctx, user)
}

// RevokeGrant removes user's grant id; later calls it covered ask again.
// An id the user has no grant with is an error wrapping
// grants.ErrNoGrant.
func (c Client) RevokeGrant(ctx context.Context, user, id string) (grants.Grant, error) {
	return grants.Workflows{Client: c.Temporal}.Revoke(ctx, user, id)
}
