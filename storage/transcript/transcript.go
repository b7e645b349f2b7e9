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
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/blobstore"
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

// Space is where chunks live in a blob store shared with the payloads:
// transcripts/ab/cdef….json, the layout the data directory always had.
//
// It is not Durable: a chunk is not synced to disk before Append returns.
// A chunk a crash tears or loses no longer hashes to its id, or is
// absent, so Load reports ErrCorrupt or ErrMissing and the workflow
// resends the whole conversation, which stores it again. Syncing every
// chunk cost a model call more than the rest of storing it.
var Space = blobstore.Space{Prefix: "transcripts/", Suffix: ".json"}

type chunk struct {
	Prev     string            `json:"prev,omitempty"`
	Messages []results.Message `json:"messages"`
}

// Store keeps chunks as blobs.
type Store struct {
	blobs  *blobstore.Store
	space  blobstore.Space
	chunks *cache[[]byte]
	convs  *convCache
	// tools keeps the tool sets this process stored or read, whatever
	// the store (tools.go).
	tools *cache[[]model.ToolDef]
}

// Options configure a Store.
type Options struct {
	// CacheBytes keeps up to this many bytes of chunks in memory, so that
	// loading a conversation reads from the store only the chunks this
	// process has not stored or read before. Zero keeps none: right for a
	// store on local disk, whose reads the operating system caches, and
	// which a damaged chunk must be read from to be noticed.
	CacheBytes int64
	// ConversationBytes keeps whole decoded conversations in memory, long
	// chains up to this many bytes of their chunks and a few recent short
	// ones, so that loading a conversation again after a chunk was added
	// reads and decodes that chunk alone, or nothing when this process
	// added it (Extend). Zero keeps none.
	ConversationBytes int64
}

// New keeps chunks in blobs, under Space.
func New(blobs *blobstore.Store, o Options) *Store {
	return &Store{blobs: blobs, space: Space, chunks: newCache[[]byte](o.CacheBytes), convs: newConvCache(o.ConversationBytes), tools: newCache[[]model.ToolDef](toolSetsBytes)}
}

// NewStore keeps chunks in the directory dir, creating it if needed: the
// transcript directory of a data directory (datadir.Transcripts), which
// holds the same files as New on the data directory's store.
func NewStore(dir string) (*Store, error) {
	blobs, err := blobstore.OpenDir(dir, nil)
	if err != nil {
		return nil, fmt.Errorf("create transcript directory: %w", err)
	}
	return &Store{blobs: blobs, space: blobstore.Space{Suffix: Space.Suffix}, tools: newCache[[]model.ToolDef](toolSetsBytes)}, nil
}

// Append stores messages after head ("" starts a new chain) and returns
// the new head.
func (s *Store) Append(head string, messages []results.Message) (string, error) {
	return s.AppendContext(context.Background(), head, messages)
}

// AppendContext is Append with a context, for remote stores.
func (s *Store) AppendContext(ctx context.Context, head string, messages []results.Message) (string, error) {
	data, err := encode(head, messages)
	if err != nil {
		return "", err
	}
	return s.putEncoded(ctx, data)
}

// Extend stores the last n messages of conv after head, as Append does,
// and keeps conv as the conversation ending at the new head, so that
// loading it next reads and decodes nothing: what a model call does with
// the conversation it loaded and the reply it got. conv must be the
// conversation ending at head followed by those n messages; the store
// owns it afterwards.
func (s *Store) Extend(ctx context.Context, head string, conv []results.Message, n int) (string, error) {
	id, _, err := s.ExtendUnlessSmall(ctx, head, conv, n, 0)
	return id, err
}

// ExtendUnlessSmall is Extend for a chunk worth a file: one that would
// encode to fewer than minBytes is not stored, stored is false and id
// empty, and the caller carries the messages inline instead.
func (s *Store) ExtendUnlessSmall(ctx context.Context, head string, conv []results.Message, n, minBytes int) (id string, stored bool, err error) {
	if n < 0 || n > len(conv) {
		return "", false, fmt.Errorf("extend transcript: %d new messages of a conversation of %d", n, len(conv))
	}
	data, err := encode(head, conv[len(conv)-n:])
	if err != nil {
		return "", false, err
	}
	if len(data) < minBytes {
		return "", false, nil
	}
	if id, err = s.putEncoded(ctx, data); err != nil {
		return "", false, err
	}
	s.convs.seed(head, id, conv, int64(len(data)))
	return id, true, nil
}

// encode is the chunk of messages after head as stored.
func encode(head string, messages []results.Message) ([]byte, error) {
	data, err := json.Marshal(chunk{Prev: head, Messages: messages})
	if err != nil {
		return nil, fmt.Errorf("encode transcript chunk: %w", err)
	}
	return data, nil
}

// putEncoded stores an encoded chunk and returns its id.
func (s *Store) putEncoded(ctx context.Context, data []byte) (string, error) {
	// A chunk this process stored or read intact is not checked again.
	if id := blobstore.Sum(data); s.chunks.has(id) {
		return id, nil
	}
	// A chunk already stored intact (an activity retry) is not written
	// again; a damaged one is replaced, or every later head that reaches
	// it would fail to load.
	id, err := s.blobs.Put(ctx, s.space, data)
	if err != nil {
		return "", fmt.Errorf("store transcript chunk: %w", err)
	}
	s.chunks.put(id, data, len(data))
	return id, nil
}

// Load returns the whole conversation ending at head, oldest first.
func (s *Store) Load(head string) ([]results.Message, error) {
	return s.LoadContext(context.Background(), head)
}

// LoadContext is Load with a context, for remote stores.
func (s *Store) LoadContext(ctx context.Context, head string) ([]results.Message, error) {
	return s.LoadWith(ctx, head, nil)
}

// LoadWith returns the conversation ending at head followed by more, in
// a slice of the caller's own: what a model call sends, copied once
// rather than once to load and again to append to.
func (s *Store) LoadWith(ctx context.Context, head string, more []results.Message) ([]results.Message, error) {
	msgs, shared, err := s.load(ctx, head)
	if err != nil {
		return nil, err
	}
	if !shared {
		return append(msgs, more...), nil
	}
	// The cached slice is shared: callers get their own.
	out := make([]results.Message, 0, len(msgs)+len(more))
	return append(append(out, msgs...), more...), nil
}

// load returns the conversation ending at head; shared says it is the
// conversation cache's, which callers must copy.
func (s *Store) load(ctx context.Context, head string) ([]results.Message, bool, error) {
	if head == "" {
		return nil, false, nil
	}
	var chunks [][]results.Message
	var base *conv
	var size int64
	for id := head; id != ""; {
		if c, ok := s.convs.get(id); ok {
			base = c
			break
		}
		if !blobstore.ValidSum(id) {
			return nil, false, fmt.Errorf("transcript chunk id %q is malformed", id)
		}
		data, err := s.get(ctx, id)
		if err != nil {
			return nil, false, err
		}
		var c chunk
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&c); err != nil {
			return nil, false, fmt.Errorf("decode transcript chunk %s: %w: %w", id, ErrCorrupt, err)
		}
		chunks = append(chunks, c.Messages)
		size += int64(len(data))
		id = c.Prev
	}
	if base != nil && len(chunks) == 0 {
		return base.msgs, true, nil
	}
	msgs := s.convs.extend(head, base, chunks, size)
	return msgs, base != nil || s.convs != nil, nil
}

// Forget drops the decoded conversation kept for head, once nothing will
// load it again: a turn that compacted goes on from the compacted
// conversation, and the one it compacted would otherwise stay in memory
// until newer conversations pushed it out. The chunks stay stored.
func (s *Store) Forget(head string) {
	s.convs.forget(head)
}

// get reads one chunk's encoding, from the cache if it is there.
func (s *Store) get(ctx context.Context, id string) ([]byte, error) {
	if data, ok := s.chunks.get(id); ok {
		return data, nil
	}
	data, err := s.read(ctx, s.space, "transcript chunk", id)
	if err != nil {
		return nil, err
	}
	s.chunks.put(id, data, len(data))
	return data, nil
}

// read reads the blob id of space sp, a what, with the store's errors
// mapped onto ErrMissing and ErrCorrupt.
func (s *Store) read(ctx context.Context, sp blobstore.Space, what, id string) ([]byte, error) {
	data, err := s.blobs.Get(ctx, sp, id)
	switch {
	case errors.Is(err, blobstore.ErrMissing):
		return nil, fmt.Errorf("load %s %s: %w: %w", what, id, ErrMissing, err)
	case errors.Is(err, blobstore.ErrCorrupt):
		return nil, fmt.Errorf("load %s %s: %w: %w", what, id, ErrCorrupt, err)
	case err != nil:
		return nil, fmt.Errorf("load %s %s: %w", what, id, err)
	}
	return data, nil
}

// Stats reports how many chunks and bytes the store holds.
func (s *Store) Stats() (chunks int, bytes int64, err error) {
	return s.blobs.Stats(context.Background(), s.space)
}
