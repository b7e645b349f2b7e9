package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/connections"
)

// RefreshMargin is how long before its expiry a token is refreshed: a
// token that expires while the tool's request is in flight is as good as
// expired.
const RefreshMargin = 30 * time.Second

// Store is a connections.Store that refreshes: Get of a token past its
// expiry, for a configured provider, refreshes it with its refresh token
// and stores the new one before returning it. When the refresh cannot
// work (no refresh token, the provider refused the grant, or the provider
// could not be reached), Get answers ErrNotConnected, so the tool asks
// for the connection again (connection_required) instead of failing with
// an internal error; the reason goes to the log at warn, without tokens.
// A refused grant also deletes the stored credential.
type Store struct {
	connections.Store
	Providers *Providers
	// Logger gets refresh failures; slog's default if nil.
	Logger *slog.Logger
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// Margin is how long before expiry a token counts as expired;
	// RefreshMargin if zero.
	Margin time.Duration

	// mu serialises refreshes per user and provider within this process,
	// so parallel tools of one step refresh once (a provider that rotates
	// refresh tokens would refuse the second).
	mu    sync.Mutex
	locks map[[2]string]*sync.Mutex
}

var _ connections.Store = (*Store)(nil)

// NewStore wraps inner.
func NewStore(inner connections.Store, ps *Providers) *Store {
	return &Store{Store: inner, Providers: ps}
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) expired(c connections.Credential) bool {
	m := s.Margin
	if m <= 0 {
		m = RefreshMargin
	}
	return c.Expired(s.now(), m)
}

func (s *Store) lock(user, provider string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.locks == nil {
		s.locks = map[[2]string]*sync.Mutex{}
	}
	k := [2]string{user, provider}
	l, ok := s.locks[k]
	if !ok {
		l = &sync.Mutex{}
		s.locks[k] = l
	}
	return l
}

// Get returns the credential, refreshed if it had expired.
func (s *Store) Get(ctx context.Context, user, provider string) (connections.Credential, error) {
	c, err := s.Store.Get(ctx, user, provider)
	if err != nil || !s.expired(c) {
		return c, err
	}
	l := s.lock(user, provider)
	l.Lock()
	defer l.Unlock()
	// Another call may have refreshed while this one waited.
	if c, err = s.Store.Get(ctx, user, provider); err != nil || !s.expired(c) {
		return c, err
	}
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	p, ok := s.Providers.Get(provider)
	if !ok {
		log.Warn("Connection expired and its provider is not configured for refresh; asking the user to connect again", "user", user, "provider", provider)
		return connections.Credential{}, expired(user, provider)
	}
	fresh, err := p.Refresh(ctx, c)
	if err != nil {
		log.Warn("Connection refresh failed; asking the user to connect again", "user", user, "provider", provider, "error", err)
		if errors.Is(err, ErrRefused) {
			if dErr := s.Store.Delete(ctx, user, provider); dErr != nil {
				log.Warn("Could not delete the refused connection", "user", user, "provider", provider, "error", dErr)
			}
		}
		return connections.Credential{}, expired(user, provider)
	}
	if err := s.Store.Put(ctx, fresh); err != nil {
		return connections.Credential{}, fmt.Errorf("oauth: store the refreshed %s token of %s: %w", provider, user, err)
	}
	log.Info("Connection refreshed", "user", user, "provider", provider, "expiry", fresh.Expiry)
	return fresh, nil
}

func expired(user, provider string) error {
	return fmt.Errorf("oauth: the %s connection of %s expired and could not be refreshed: %w", provider, user, connections.ErrNotConnected)
}

// Disconnect revokes the user's token at the provider (when it has a
// revocation endpoint) and forgets it. The token is forgotten even when
// revocation fails; the error then says so.
func Disconnect(ctx context.Context, store connections.Store, ps *Providers, user, provider string) (bool, error) {
	c, err := store.Get(ctx, user, provider)
	if errors.Is(err, connections.ErrNotConnected) {
		return false, nil
	}
	var revokeErr error
	if err == nil {
		if p, ok := ps.Get(provider); ok {
			// The refresh token revokes the whole grant where the provider
			// ties them; the access token then goes too.
			if c.RefreshToken != "" {
				revokeErr = p.Revoke(ctx, c.RefreshToken, "refresh_token")
			}
			if rErr := p.Revoke(ctx, c.Token, "access_token"); rErr != nil && revokeErr == nil {
				revokeErr = rErr
			}
		}
	}
	if dErr := store.Delete(ctx, user, provider); dErr != nil {
		return false, dErr
	}
	if revokeErr != nil {
		return true, fmt.Errorf("the token is forgotten, but revoking it at the provider failed: %w", revokeErr)
	}
	return true, nil
}
