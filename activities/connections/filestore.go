package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/tollgate-dev/tollgate/internal/atomicfile"
)

const (
	dirPerm  = 0o700
	filePerm = 0o600
)

// FileStore keeps each credential in its own JSON file,
// dir/<user>/<provider>.json, readable by the owner only. Writes are
// atomic, so a crash never leaves a half-written token behind, and one
// directory may be shared by every worker on a machine.
type FileStore struct {
	dir string
}

var _ Store = (*FileStore)(nil)

// NewFileStore opens (creating if needed) a store rooted at dir.
func NewFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("connections: directory is empty")
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("connections: create %s: %w", dir, err)
	}
	return &FileStore{dir: dir}, nil
}

func (s *FileStore) path(user, provider string) string {
	return filepath.Join(s.dir, user, provider+".json")
}

// Get reads the credential of user for provider.
func (s *FileStore) Get(ctx context.Context, user, provider string) (Credential, error) {
	if err := ctx.Err(); err != nil {
		return Credential{}, err
	}
	if err := validPair(user, provider); err != nil {
		return Credential{}, fmt.Errorf("connections: get: %w", err)
	}
	data, err := os.ReadFile(s.path(user, provider))
	if errors.Is(err, fs.ErrNotExist) {
		return Credential{}, notConnected(user, provider)
	}
	if err != nil {
		return Credential{}, fmt.Errorf("connections: read %s/%s: %w", user, provider, err)
	}
	var c Credential
	if err := json.Unmarshal(data, &c); err != nil {
		// The decoder's message may quote file content, which is a token.
		return Credential{}, fmt.Errorf("connections: %s/%s is not a valid credential file", user, provider)
	}
	if c.User != user || c.Provider != provider {
		return Credential{}, fmt.Errorf("connections: file for %s/%s holds %s/%s", user, provider, c.User, c.Provider)
	}
	return c, nil
}

// Put writes c, replacing any earlier credential of its user and provider.
// A zero CreatedAt is set to now.
func (s *FileStore) Put(ctx context.Context, c Credential) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validCredential(c); err != nil {
		return fmt.Errorf("connections: put: %w", err)
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = time.Now().UTC()
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("connections: encode %s/%s: %w", c.User, c.Provider, err)
	}
	path := s.path(c.User, c.Provider)
	if err := os.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return fmt.Errorf("connections: store %s/%s: %w", c.User, c.Provider, err)
	}
	if err := atomicfile.Write(path, data, filePerm); err != nil {
		return fmt.Errorf("connections: write %s/%s: %w", c.User, c.Provider, err)
	}
	return nil
}

// Delete removes the credential of user for provider.
func (s *FileStore) Delete(ctx context.Context, user, provider string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validPair(user, provider); err != nil {
		return fmt.Errorf("connections: delete: %w", err)
	}
	err := os.Remove(s.path(user, provider))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("connections: delete %s/%s: %w", user, provider, err)
	}
	return nil
}
