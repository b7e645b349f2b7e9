package connections

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// MemoryStore is a Store that forgets everything when the process exits,
// for tests and for hosts that inject credentials at start-up.
type MemoryStore struct {
	mu    sync.RWMutex
	creds map[[2]string]Credential
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{creds: map[[2]string]Credential{}}
}

func (s *MemoryStore) Get(ctx context.Context, user, provider string) (Credential, error) {
	if err := validPair(user, provider); err != nil {
		return Credential{}, fmt.Errorf("connections: get: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.creds[[2]string{user, provider}]
	if !ok {
		return Credential{}, notConnected(user, provider)
	}
	c.Scopes = slices.Clone(c.Scopes)
	return c, nil
}

func (s *MemoryStore) Put(ctx context.Context, c Credential) error {
	if err := validCredential(c); err != nil {
		return fmt.Errorf("connections: put: %w", err)
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = time.Now().UTC()
	}
	c.Scopes = slices.Clone(c.Scopes)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.creds[[2]string{c.User, c.Provider}] = c
	return nil
}

func (s *MemoryStore) Delete(ctx context.Context, user, provider string) error {
	if err := validPair(user, provider); err != nil {
		return fmt.Errorf("connections: delete: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.creds, [2]string{user, provider})
	return nil
}
