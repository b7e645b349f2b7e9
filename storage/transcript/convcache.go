package transcript

import (
	"slices"
	"sync"

	"github.com/tollgate-dev/tollgate/results"
)

// convCache keeps whole decoded conversations of long chains by their
// head, up to a number of encoded bytes, least recently used out first.
// Every model call loads its conversation from its head, and a chain grows
// a chunk a call: without it a turn's thousandth call reads and decodes a
// thousand chunks, and a turn's time a call grows with its length. With
// it, a load reads only the chunks added since the head it last loaded.
//
// A head is the hash of its chunk, which names the one before: a cached
// conversation is never stale. Short chains are not kept; they cost little
// to read, and a worker parking thousands of short turns should not hold
// their conversations.
type convCache struct {
	mu    sync.Mutex
	convs *lru[*conv]
}

// conv is one cached conversation. Msgs is never changed below its
// length; grown says whether some longer conversation was built by
// appending to Msgs' backing array, after which the next one copies.
type conv struct {
	id     string
	msgs   []results.Message
	chunks int
	bytes  int64
	grown  bool
}

// minCachedChunks is the shortest chain kept.
const minCachedChunks = 16

func newConvCache(maxBytes int64) *convCache {
	if maxBytes <= 0 {
		return nil
	}
	return &convCache{convs: newLRU[*conv](maxBytes)}
}

// get returns the cached conversation ending at id. A nil cache holds
// nothing.
func (c *convCache) get(id string) (*conv, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.convs.get(id)
}

// extend builds the conversation ending at id from base (nil: none) and
// chunks, the messages of the chunks after base, newest first, and caches
// it when its chain is long enough. It returns the messages; callers get
// a copy (Store.LoadContext), since the cached slice is shared.
func (c *convCache) extend(id string, base *conv, chunks [][]results.Message, bytes int64) []results.Message {
	n := 0
	for _, ch := range chunks {
		n += len(ch)
	}
	var msgs []results.Message
	count, size := len(chunks), bytes
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	switch {
	case base != nil && !base.grown:
		// Appending past base's length does not change what base holds.
		msgs, base.grown = base.msgs, true
	case base != nil:
		msgs = slices.Grow(slices.Clone(base.msgs), n)
	default:
		msgs = make([]results.Message, 0, n)
	}
	if base != nil {
		count, size = count+base.chunks, size+base.bytes
	}
	for i := len(chunks) - 1; i >= 0; i-- {
		msgs = append(msgs, chunks[i]...)
	}
	if c == nil || count < minCachedChunks || size > c.convs.max {
		return msgs
	}
	if base != nil {
		// The turn has moved on from base; its conversation lives on as
		// the start of this one.
		c.convs.remove(base.id)
	}
	c.convs.add(id, &conv{id: id, msgs: msgs, chunks: count, bytes: size}, size)
	return msgs
}

// forget drops the conversation cached for id, if any.
func (c *convCache) forget(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.convs.remove(id)
}
