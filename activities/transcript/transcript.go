// Package transcript stores a turn's conversation as a chain of
// content-addressed chunks, so that each model call sends only the
// messages added since the previous one plus the id of the chain's head.
// History then grows with the conversation, not with its square.
//
// A chunk is {prev, messages}; its id is the SHA-256 of its encoding, so
// storing the same chunk twice (an activity retry) is harmless and a head
// id names one exact conversation.
package transcript

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/atomicfile"
)

// ErrMissing is returned when a chunk of the chain is not in the store,
// for example when the worker that wrote it kept its data on another
// machine. The caller should resend the whole conversation.
var ErrMissing = errors.New("transcript chunk missing")

// ErrCorrupt is returned when a chunk exists but cannot be read or does
// not hold what its id names (a truncated write, a bad disk, an edit).
// Reading it again will not help; like ErrMissing, the caller should
// resend the whole conversation.
var ErrCorrupt = errors.New("transcript chunk unreadable or corrupt")

type chunk struct {
	Prev     string            `json:"prev,omitempty"`
	Messages []results.Message `json:"messages"`
}

// Store keeps chunks as files under a directory.
type Store struct {
	dir string
}

// NewStore creates the directory if needed.
func NewStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create transcript directory: %w", err)
	}
	return &Store{dir: dir}, nil
}

var validID = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (s *Store) path(id string) string {
	return filepath.Join(s.dir, id[:2], id[2:]+".json")
}

// Append stores messages after head ("" starts a new chain) and returns
// the new head.
func (s *Store) Append(head string, messages []results.Message) (string, error) {
	data, err := json.Marshal(chunk{Prev: head, Messages: messages})
	if err != nil {
		return "", fmt.Errorf("encode transcript chunk: %w", err)
	}
	sum := sha256.Sum256(data)
	id := hex.EncodeToString(sum[:])
	p := s.path(id)
	// A chunk already stored (an activity retry) is kept only if it is
	// intact: a damaged file under this id would otherwise be named by
	// every later head that reaches it, and each of those loads would fail.
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, data) {
		return id, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", fmt.Errorf("store transcript chunk %s: %w", id, err)
	}
	if err := atomicfile.Write(p, data, 0o600); err != nil {
		return "", fmt.Errorf("store transcript chunk %s: %w", id, err)
	}
	return id, nil
}

// Load returns the whole conversation ending at head, oldest first.
func (s *Store) Load(head string) ([]results.Message, error) {
	var chunks [][]results.Message
	for id := head; id != ""; {
		if !validID.MatchString(id) {
			return nil, fmt.Errorf("transcript chunk id %q is malformed", id)
		}
		data, err := os.ReadFile(s.path(id))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("load transcript chunk %s: %w", id, ErrMissing)
		}
		if err != nil {
			return nil, fmt.Errorf("load transcript chunk %s: %w: %w", id, ErrCorrupt, err)
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != id {
			return nil, fmt.Errorf("load transcript chunk %s: %w: content does not match its id", id, ErrCorrupt)
		}
		var c chunk
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("decode transcript chunk %s: %w: %w", id, ErrCorrupt, err)
		}
		chunks = append(chunks, c.Messages)
		id = c.Prev
	}
	var out []results.Message
	for i := len(chunks) - 1; i >= 0; i-- {
		out = append(out, chunks[i]...)
	}
	return out, nil
}

// Stats reports how many chunks and bytes the store holds.
func (s *Store) Stats() (chunks int, bytes int64, err error) {
	err = filepath.WalkDir(s.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		chunks++
		bytes += info.Size()
		return nil
	})
	return chunks, bytes, err
}
