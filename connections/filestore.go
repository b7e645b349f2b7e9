package connections

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	dir    string
	sealer Sealer
}

var _ Store = (*FileStore)(nil)

// FileStoreOptions configure a FileStore.
type FileStoreOptions struct {
	// Sealer, when set, encrypts every file written and refuses to read
	// plain ones: files written without one (before encryption was
	// turned on) are refused with ErrUnsealed until SealPlainFiles seals
	// them, or a Put replaces them.
	Sealer Sealer
}

// sealedMagic starts a sealed credential file, so a reader tells one
// from the plain JSON written without a Sealer.
const sealedMagic = "tollgate-sealed-credential v1\n"

// NewFileStore opens (creating if needed) a store rooted at dir that
// keeps credentials in plain JSON (owner-only files).
func NewFileStore(dir string) (*FileStore, error) {
	return NewFileStoreWith(dir, FileStoreOptions{})
}

// NewFileStoreWith is NewFileStore with options.
func NewFileStoreWith(dir string, opts FileStoreOptions) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("connections: directory is empty")
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("connections: create %s: %w", dir, err)
	}
	if err := tighten(dir); err != nil {
		return nil, err
	}
	return &FileStore{dir: dir, sealer: opts.Sealer}, nil
}

// tighten makes an existing store owner-only: MkdirAll leaves the mode of
// a directory that is already there, so a store created by hand or by an
// older version at 0777 would otherwise keep every token readable.
func tighten(dir string) error {
	// A store reached through a link (a data directory moved to another
	// disk) is tightened where it really is; WalkDir would stop at the link.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("connections: resolve %s: %w", dir, err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			// Another worker's temporary file, renamed away mid-walk.
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			// Chmod follows links; a link planted here must not let the
			// store change modes elsewhere.
			return nil
		case d.IsDir():
			return chmodIfLoose(path, d, dirPerm)
		case d.Type().IsRegular():
			// Every file here is a token or a temporary copy of one.
			return chmodIfLoose(path, d, filePerm)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("connections: restrict %s to its owner: %w", dir, err)
	}
	return nil
}

func chmodIfLoose(path string, d fs.DirEntry, perm fs.FileMode) error {
	info, err := d.Info()
	if err == nil && info.Mode().Perm() != perm {
		err = os.Chmod(path, perm)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
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
	rest, isSealed := bytes.CutPrefix(data, []byte(sealedMagic))
	switch {
	case isSealed && s.sealer == nil:
		return Credential{}, fmt.Errorf("connections: %s/%s is encrypted and this store has no key to open it", user, provider)
	case isSealed:
		if data, err = s.sealer.Open(rest); err != nil {
			// The sealer's own words name no plaintext; keep them for the operator.
			return Credential{}, fmt.Errorf("connections: %s/%s could not be decrypted: %w", user, provider, err)
		}
	case s.sealer != nil:
		// Anyone who can write the data directory could have put a plain
		// file here; serving it would hand their token to this user's
		// tools. Files that predate encryption are sealed on purpose, by
		// the migration, not trusted on read.
		return Credential{}, fmt.Errorf("connections: %s/%s is %w while this store seals its tokens, so it is refused; if the file is yours, seal the store's plain files with `starter connections migrate` (same TOLLGATE_DATA and TOLLGATE_CODEC_KEYS_FILE)", user, provider, ErrUnsealed)
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
	if s.sealer != nil {
		sealed, err := s.sealer.Seal(data)
		if err != nil {
			return fmt.Errorf("connections: encrypt %s/%s: %w", c.User, c.Provider, err)
		}
		data = append([]byte(sealedMagic), sealed...)
	}
	path := s.path(c.User, c.Provider)
	userDir := filepath.Dir(path)
	if err := os.MkdirAll(userDir, dirPerm); err != nil {
		return fmt.Errorf("connections: store %s/%s: %w", c.User, c.Provider, err)
	}
	// The user's directory may predate the store (or have been loosened
	// since NewFileStore ran); MkdirAll would leave its mode alone.
	if err := os.Chmod(userDir, dirPerm); err != nil {
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

// ErrUnsealed is returned, wrapped, by Get on a store that seals when the
// credential file holds plain text.
var ErrUnsealed = errors.New("stored unencrypted")

// SealPlainFiles is the migration to a sealed store: it seals, in place
// and atomically, every plain credential file, and returns the
// "user/provider" names it sealed. A file that is not a valid credential
// of its own user and provider is left as it is and reported in the
// error, with the rest still sealed. Run it before workers start sealing,
// or while none connects accounts: a connection made between reading a
// file and replacing it would be lost.
func (s *FileStore) SealPlainFiles(ctx context.Context) ([]string, error) {
	if s.sealer == nil {
		return nil, errors.New("connections: this store has no key to seal files with")
	}
	users, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("connections: list %s: %w", s.dir, err)
	}
	var sealed []string
	var problems []error
	for _, u := range users {
		// Links are not followed: a migration must not write outside the store.
		if !u.IsDir() || ValidName(u.Name()) != nil {
			continue
		}
		files, err := os.ReadDir(filepath.Join(s.dir, u.Name()))
		if err != nil {
			problems = append(problems, fmt.Errorf("connections: list %s: %w", u.Name(), err))
			continue
		}
		for _, f := range files {
			provider, ok := strings.CutSuffix(f.Name(), ".json")
			if !ok || !f.Type().IsRegular() || ValidName(provider) != nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return sealed, err
			}
			did, err := s.sealPlain(u.Name(), provider)
			if err != nil {
				problems = append(problems, err)
			} else if did {
				sealed = append(sealed, u.Name()+"/"+provider)
			}
		}
	}
	return sealed, errors.Join(problems...)
}

// sealPlain seals one file if it is plain; false when it was sealed already.
func (s *FileStore) sealPlain(user, provider string) (bool, error) {
	path := s.path(user, provider)
	data, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("connections: read %s/%s: %w", user, provider, err)
	}
	if bytes.HasPrefix(data, []byte(sealedMagic)) {
		return false, nil
	}
	var c Credential
	if err := json.Unmarshal(data, &c); err != nil || validCredential(c) != nil {
		// The decoder's message may quote file content, which is a token.
		return false, fmt.Errorf("connections: %s/%s is not a valid credential file; left unsealed", user, provider)
	}
	if c.User != user || c.Provider != provider {
		return false, fmt.Errorf("connections: the file for %s/%s holds %s/%s; left unsealed", user, provider, c.User, c.Provider)
	}
	box, err := s.sealer.Seal(data)
	if err != nil {
		return false, fmt.Errorf("connections: encrypt %s/%s: %w", user, provider, err)
	}
	// A worker may have stored a fresh, sealed token since the read; the
	// old plain one must not replace it.
	if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, data) {
		return false, fmt.Errorf("connections: %s/%s changed while it was being sealed; run the migration again", user, provider)
	}
	if err := atomicfile.Write(path, append([]byte(sealedMagic), box...), filePerm); err != nil {
		return false, fmt.Errorf("connections: write %s/%s: %w", user, provider, err)
	}
	return true, nil
}
