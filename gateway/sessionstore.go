package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// SessionStore keeps the inbox's signed-in sessions on the server. The
// cookie names a session and is signed, but it is the store that says
// whether the session still lives: signing out ends it here, so a copy
// of the cookie stops working at once, on every replica that shares the
// store.
type SessionStore interface {
	// Create records a new session.
	Create(ctx context.Context, id string, rec SessionRecord) error
	// Lookup returns a session that was created and not ended or
	// expired; false otherwise. An error is a store that did not answer.
	Lookup(ctx context.Context, id string) (SessionRecord, bool, error)
	// End ends a session; ending one that is gone is no error.
	End(ctx context.Context, id string) error
}

// SessionRecord is what the server knows of a session.
type SessionRecord struct {
	// Key is the SHA-256 (hex) of the API key that signed in.
	Key     string    `json:"key"`
	Expires time.Time `json:"expires"`
}

// maxMemorySessions bounds a MemorySessions: sign-ins need a valid key,
// so only key holders fill it, but a script that signs in in a loop
// must not exhaust memory.
const maxMemorySessions = 100_000

// MemorySessions is a SessionStore for one process (worker --dev, a
// single gateway): sessions end when it restarts.
type MemorySessions struct {
	mu sync.Mutex
	m  map[string]SessionRecord
}

// NewMemorySessions returns an empty store.
func NewMemorySessions() *MemorySessions { return &MemorySessions{m: map[string]SessionRecord{}} }

func (s *MemorySessions) Create(_ context.Context, id string, rec SessionRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxMemorySessions {
		now := time.Now()
		for k, r := range s.m {
			if !now.Before(r.Expires) {
				delete(s.m, k)
			}
		}
		if len(s.m) >= maxMemorySessions {
			return fmt.Errorf("gateway: %d sessions are signed in, the most one process keeps", len(s.m))
		}
	}
	s.m[id] = rec
	return nil
}

func (s *MemorySessions) Lookup(_ context.Context, id string) (SessionRecord, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.m[id]
	if ok && !time.Now().Before(rec.Expires) {
		delete(s.m, id)
		return SessionRecord{}, false, nil
	}
	return rec, ok, nil
}

func (s *MemorySessions) End(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

// BucketSessions is a SessionStore in a bucket (a directory, S3, GCS,
// Azure: gocloud.dev/blob) that every gateway replica opens: one object
// per session, named by the SHA-256 of its id, so reading the bucket
// gives nobody a cookie.
type BucketSessions struct {
	b *blob.Bucket
	// maxAge is the longest a session lives; objects older are swept.
	maxAge time.Duration

	mu        sync.Mutex
	lastSweep time.Time
}

// sweepEvery is how often Create looks for sessions that expired
// without being signed out.
const sweepEvery = time.Hour

// NewBucketSessions keeps sessions in b, which the caller closes after
// the store's last use. maxAge is Options.SessionTTL, the longest any
// session lives.
func NewBucketSessions(b *blob.Bucket, maxAge time.Duration) *BucketSessions {
	return &BucketSessions{b: b, maxAge: maxAge, lastSweep: time.Now()}
}

func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:]) + ".json"
}

func (s *BucketSessions) Create(ctx context.Context, id string, rec SessionRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("gateway: encode a session: %w", err)
	}
	if err := s.b.WriteAll(ctx, sessionKey(id), b, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("gateway: store a session: %w", err)
	}
	s.maybeSweep()
	return nil
}

func (s *BucketSessions) Lookup(ctx context.Context, id string) (SessionRecord, bool, error) {
	b, err := s.b.ReadAll(ctx, sessionKey(id))
	if gcerrors.Code(err) == gcerrors.NotFound {
		return SessionRecord{}, false, nil
	}
	if err != nil {
		return SessionRecord{}, false, fmt.Errorf("gateway: read a session: %w", err)
	}
	var rec SessionRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		// A torn or foreign object is no session.
		return SessionRecord{}, false, nil
	}
	if !time.Now().Before(rec.Expires) {
		_ = s.End(ctx, id)
		return SessionRecord{}, false, nil
	}
	return rec, true, nil
}

func (s *BucketSessions) End(ctx context.Context, id string) error {
	if err := s.b.Delete(ctx, sessionKey(id)); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("gateway: end a session: %w", err)
	}
	return nil
}

// maybeSweep deletes, at most once per sweepEvery and in the
// background, sessions older than maxAge: those nobody signed out of.
func (s *BucketSessions) maybeSweep() {
	s.mu.Lock()
	due := time.Since(s.lastSweep) >= sweepEvery
	if due {
		s.lastSweep = time.Now()
	}
	s.mu.Unlock()
	if due {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_ = s.Sweep(ctx)
		}()
	}
}

// Sweep deletes the sessions that outlived maxAge.
func (s *BucketSessions) Sweep(ctx context.Context) error {
	it := s.b.List(nil)
	cutoff := time.Now().Add(-s.maxAge)
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("gateway: list sessions: %w", err)
		}
		if !obj.IsDir && obj.ModTime.Before(cutoff) {
			if err := s.b.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return fmt.Errorf("gateway: sweep a session: %w", err)
			}
		}
	}
}
