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
)

const (
	dirPerm    = 0o700
	tempPrefix = ".tmp-"
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
	if err := writeAtomic(s.path(c.User, c.Provider), data); err != nil {
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

// writeAtomic makes path appear whole or not at all. os.CreateTemp
// creates the file 0600 before any byte of the token is written.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
