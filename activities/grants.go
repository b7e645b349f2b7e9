package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	conns "github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/grants"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// Activity type names of remembered grants.
const (
	LookupGrantsName = "LookupGrants"
	AddGrantName     = "AddGrant"
)

// ErrTypeGrantRefused: the grants store refused a grant (the user's list
// is full, the tool is gone); the message says why, and retrying will
// not help.
const ErrTypeGrantRefused = "GrantRefused"

// LookupGrantsInput asks which of a step's calls waiting for approval a
// remembered grant lets run.
type LookupGrantsInput struct {
	User    string        `json:"user"`
	Session string        `json:"session,omitempty"`
	Calls   []GrantedCall `json:"calls"`
}

// GrantedCall is one call a lookup asks about.
type GrantedCall struct {
	Tool     string `json:"tool"`
	ArgsHash string `json:"args_hash"`
}

// LookupGrantsResult has one entry per call asked about: the grant that
// lets it run, or nil.
type LookupGrantsResult struct {
	Grants []*results.GrantUse `json:"grants"`
}

// LookupGrants finds the grants that let calls run without asking. A
// grant whose tool or connection changed since it was made does not
// apply and is marked invalidated in the store, so listings show it.
// The workflow runs it as a local activity: its answer is recorded, and
// a replay never asks the store again.
func (a *Activities) LookupGrants(ctx context.Context, in LookupGrantsInput) (LookupGrantsResult, error) {
	store := a.grantStore(ctx)
	gs, err := store.List(ctx, in.User)
	if err != nil {
		return LookupGrantsResult{}, err
	}
	out := LookupGrantsResult{Grants: make([]*results.GrantUse, len(in.Calls))}
	if len(gs) == 0 {
		return out, nil
	}
	var stale []grants.Invalidation
	for i, c := range in.Calls {
		toolFP, connFP, err := a.fingerprints(ctx, in.User, c.Tool)
		if err != nil {
			// A tool this worker no longer offers matches no grant.
			continue
		}
		g, st := grants.Match(gs, in.Session, grants.Call{Tool: c.Tool, ArgsHash: c.ArgsHash, ToolFingerprint: toolFP, ConnectionFingerprint: connFP})
		stale = append(stale, st...)
		if g != nil {
			out.Grants[i] = grants.UseOf(*g)
		}
	}
	if len(stale) > 0 {
		// Best effort: the grant does not apply either way.
		if err := store.Invalidate(ctx, in.User, stale); err != nil {
			activity.GetLogger(ctx).Warn("Could not mark grants invalidated", "user", in.User, "error", err)
		}
	}
	return out, nil
}

// AddGrantInput stores a grant made by an approve with remember; the
// activity adds the fingerprints of the tool and connection as they are.
type AddGrantInput struct {
	Grant grants.Grant `json:"grant"`
	// TaskQueue is where the user's grants workflow starts if it must.
	TaskQueue string `json:"task_queue"`
}

// AddGrant stores a grant. Refusals (a full list, a tool that is gone)
// fail it without retries, with a sentence.
func (a *Activities) AddGrant(ctx context.Context, in AddGrantInput) (grants.Grant, error) {
	g := in.Grant
	toolFP, connFP, err := a.fingerprints(ctx, g.User, g.Tool)
	if err != nil {
		return grants.Grant{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeGrantRefused, nil)
	}
	g.ToolFingerprint, g.ConnectionFingerprint = toolFP, connFP
	if err := g.Valid(); err != nil {
		return grants.Grant{}, temporal.NewNonRetryableApplicationError("the grant is not valid: "+err.Error(), ErrTypeGrantRefused, nil)
	}
	stored, err := a.grantStore(ctx).Add(ctx, in.TaskQueue, g)
	if err != nil {
		var refused *grants.RefusedError
		if errors.As(err, &refused) {
			return grants.Grant{}, temporal.NewNonRetryableApplicationError(refused.Reason, ErrTypeGrantRefused, nil)
		}
		return grants.Grant{}, err
	}
	return stored, nil
}

// fingerprints are the tool's definition and the user's connection for
// it as this worker has them now.
func (a *Activities) fingerprints(ctx context.Context, user, name string) (toolFP, connFP string, err error) {
	t, ok := a.Tools.Get(name)
	if !ok {
		return "", "", fmt.Errorf("tool %s is not offered by this worker now", name)
	}
	s := t.Spec()
	toolFP = grants.ToolFingerprint(s.Name, s.Description, s.Schema)
	cu, ok := t.(tool.ConnectionUser)
	if !ok || cu.ConnectionProvider() == "" || a.Connections == nil {
		return toolFP, "", nil
	}
	provider := cu.ConnectionProvider()
	cred, err := a.Connections.Get(ctx, user, provider)
	switch {
	case errors.Is(err, conns.ErrNotConnected):
		return toolFP, grants.ConnectionFingerprint(provider, false, cred.CreatedAt, nil), nil
	case err != nil:
		return "", "", fmt.Errorf("look up the %s connection: %w", provider, err)
	}
	return toolFP, grants.ConnectionFingerprint(provider, true, cred.CreatedAt, cred.Scopes), nil
}

func (a *Activities) grantStore(ctx context.Context) grants.Store {
	if a.Grants != nil {
		return a.Grants
	}
	return grants.Workflows{Client: activity.GetClient(ctx)}
}
