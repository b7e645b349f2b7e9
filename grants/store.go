package grants

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ErrNoGrant is returned, wrapped, by Store.Revoke for an id the user
// has no grant with.
var ErrNoGrant = errors.New("no such grant")

// RefusedError is a grant the store refused, with why (a full list, a
// grant missing a field); sending it again will not help.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// Store keeps each user's grants. Workflows is the durable one; Memory
// serves tests.
type Store interface {
	// List returns the user's grants, oldest first; none for a user who
	// never had one.
	List(ctx context.Context, user string) ([]Grant, error)
	// Add stores g, started on taskQueue when its user has no grants yet;
	// adding a grant with the id of one stored returns the stored one.
	Add(ctx context.Context, taskQueue string, g Grant) (Grant, error)
	// Revoke removes the user's grant id and returns it; an id the user
	// has no grant with is an error wrapping ErrNoGrant.
	Revoke(ctx context.Context, user, id string) (Grant, error)
	// Invalidate marks grants that no longer apply.
	Invalidate(ctx context.Context, user string, inv []Invalidation) error
}

// Memory is a Store in memory, for tests.
type Memory struct {
	mu     sync.Mutex
	byUser map[string][]Grant
	// Now stamps invalidations; nil uses time.Now.
	Now func() time.Time
}

func (m *Memory) List(_ context.Context, user string) ([]Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.byUser[user]), nil
}

func (m *Memory) Add(_ context.Context, _ string, g Grant) (Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byUser == nil {
		m.byUser = map[string][]Grant{}
	}
	gs, err := Add(m.byUser[g.User], g)
	if err != nil {
		return Grant{}, &RefusedError{Reason: err.Error()}
	}
	m.byUser[g.User] = gs
	i := slices.IndexFunc(gs, func(o Grant) bool { return o.ID == g.ID })
	return gs[i], nil
}

func (m *Memory) Revoke(_ context.Context, user, id string) (Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	gs, g, err := Revoke(m.byUser[user], user, id)
	if err != nil {
		return Grant{}, err
	}
	m.byUser[user] = gs
	return g, nil
}

func (m *Memory) Invalidate(_ context.Context, user string, inv []Invalidation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if m.Now != nil {
		now = m.Now()
	}
	m.byUser[user] = Invalidate(m.byUser[user], inv, now)
	return nil
}

// Revoke removes grant id from gs.
func Revoke(gs []Grant, user, id string) ([]Grant, Grant, error) {
	i := slices.IndexFunc(gs, func(g Grant) bool { return g.ID == id })
	if i < 0 {
		return gs, Grant{}, fmt.Errorf("user %s has no grant %q: %w", user, id, ErrNoGrant)
	}
	g := gs[i]
	return slices.Delete(slices.Clone(gs), i, i+1), g, nil
}

// Invalidate marks the grants inv names, once; ids gs lacks are ignored
// (revoked meanwhile).
func Invalidate(gs []Grant, inv []Invalidation, now time.Time) []Grant {
	out := slices.Clone(gs)
	for _, v := range inv {
		for i := range out {
			if out[i].ID == v.ID && out[i].Invalidated == "" {
				at := now
				out[i].Invalidated, out[i].InvalidatedAt = v.Reason, &at
			}
		}
	}
	return out
}
