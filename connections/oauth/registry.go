package oauth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/internal/atomicfile"
)

// Registry keeps the providers discovered for MCP servers, by id.
type Registry interface {
	Save(Registration) error
	Load(id string) (Registration, bool, error)
}

// FileRegistry keeps each registration in a file of its own, readable by
// the owner only (a registration may hold a client secret the
// authorization server issued), sealed when it has a Sealer. The worker
// and the gateway must see the same directory.
type FileRegistry struct {
	dir    string
	sealer connections.Sealer
}

// FileRegistryOptions configure a FileRegistry.
type FileRegistryOptions struct {
	// Sealer, when set, encrypts every registration written and refuses
	// plain ones on read: a registration names where the person's browser
	// is sent and where their code goes, so one planted in the directory
	// must not be followed.
	Sealer connections.Sealer
}

// sealedRegistration starts a sealed registration file.
const sealedRegistration = "tollgate-sealed-registration v1\n"

// NewFileRegistry keeps registrations in dir, in plain JSON.
func NewFileRegistry(dir string) (*FileRegistry, error) {
	return NewFileRegistryWith(dir, FileRegistryOptions{})
}

// NewFileRegistryWith is NewFileRegistry with options.
func NewFileRegistryWith(dir string, opts FileRegistryOptions) (*FileRegistry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("oauth registry: create %s: %w", dir, err)
	}
	return &FileRegistry{dir: dir, sealer: opts.Sealer}, nil
}

func (r *FileRegistry) path(id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(r.dir, hex.EncodeToString(sum[:16])+".json")
}

// Save stores reg under its id, replacing an earlier one.
func (r *FileRegistry) Save(reg Registration) error {
	if err := connections.ValidName(reg.ID); err != nil {
		return fmt.Errorf("oauth registry: %w", err)
	}
	b, err := json.Marshal(reg)
	if err != nil {
		return fmt.Errorf("oauth registry: encode: %w", err)
	}
	if r.sealer != nil {
		sealed, err := r.sealer.Seal(b)
		if err != nil {
			return fmt.Errorf("oauth registry: seal %s: %w", reg.ID, err)
		}
		b = append([]byte(sealedRegistration), sealed...)
	}
	if err := atomicfile.Write(r.path(reg.ID), b, 0o600); err != nil {
		return fmt.Errorf("oauth registry: write: %w", err)
	}
	return nil
}

// Load returns the registration of id, if there is one.
func (r *FileRegistry) Load(id string) (Registration, bool, error) {
	b, err := os.ReadFile(r.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return Registration{}, false, nil
	}
	if err != nil {
		return Registration{}, false, fmt.Errorf("oauth registry: read: %w", err)
	}
	rest, isSealed := bytes.CutPrefix(b, []byte(sealedRegistration))
	switch {
	case isSealed && r.sealer == nil:
		return Registration{}, false, fmt.Errorf("oauth registry: the record of %s is encrypted and this process has no key to open it (TOLLGATE_CODEC_KEYS_FILE)", id)
	case isSealed:
		if b, err = r.sealer.Open(rest); err != nil {
			return Registration{}, false, fmt.Errorf("oauth registry: the record of %s could not be decrypted: %w", id, err)
		}
	case r.sealer != nil:
		return Registration{}, false, fmt.Errorf("oauth registry: the record of %s is not encrypted while this registry seals its records, so it is refused", id)
	}
	var reg Registration
	if err := json.Unmarshal(b, &reg); err != nil || reg.ID != id {
		return Registration{}, false, fmt.Errorf("oauth registry: the record of %s does not decode", id)
	}
	return reg, true, nil
}

// MemoryRegistry keeps registrations in memory (one process, tests).
type MemoryRegistry struct {
	mu sync.Mutex
	m  map[string]Registration
}

// NewMemoryRegistry returns an empty registry.
func NewMemoryRegistry() *MemoryRegistry { return &MemoryRegistry{m: map[string]Registration{}} }

// Save stores reg under its id.
func (r *MemoryRegistry) Save(reg Registration) error {
	if err := connections.ValidName(reg.ID); err != nil {
		return fmt.Errorf("oauth registry: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[reg.ID] = reg
	return nil
}

// Load returns the registration of id.
func (r *MemoryRegistry) Load(id string) (Registration, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reg, ok := r.m[id]
	return reg, ok, nil
}
