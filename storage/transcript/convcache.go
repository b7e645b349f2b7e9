package transcript

import (
	"slices"
	"sync"

	"github.com/tollgate-dev/tollgate/results"
)

// convCache keeps whole decoded conversations by their head, least
// recently used out first. Every model call loads its conversation from
// its head, and a chain grows a chunk a call: without it a turn's
// thousandth call reads and decodes a thousand chunks, and a turn's time a
// call grows with its length. With it, a load reads only the chunks added
// since the head it last loaded, and none at all when this process stored
// the head (Store.Extend).
//
// A head is the hash of its chunk, which names the one before: a cached
// conversation is never stale. Long chains are kept up to a number of
// encoded bytes. Short chains cost little to read, and a worker parking
// thousands of short turns should not hold their conversations: only the
// recentConvs most recently used are kept, within a quarter of the bytes
// long ones may take, enough for the turns a worker has running at once
// to find theirs.
type convCache struct {
	mu     sync.Mutex
	convs  *lru[*conv]
	recent *lru[*conv]
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

// minCachedChunks is the shortest chain kept by its bytes; recentConvs
// how many shorter ones are kept.
const (
	minCachedChunks = 16
	recentConvs     = 128
)

func newConvCache(maxBytes int64) *convCache {
	if maxBytes <= 0 {
		return nil
	}
	return &convCache{convs: newLRU[*conv](maxBytes), recent: newLRU[*conv](max(1, maxBytes/4))}
}

// get returns the cached conversation ending at id. A nil cache holds
// nothing.
func (c *convCache) get(id string) (*conv, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookup(id)
}

// lookup is get for callers that hold mu.
func (c *convCache) lookup(id string) (*conv, bool) {
	if v, ok := c.convs.get(id); ok {
		return v, true
	}
	return c.recent.get(id)
}

// extend builds the conversation ending at id from base (nil: none) and
// chunks, the messages of the chunks after base, newest first, and caches
// it. It returns the messages; callers get a copy (Store.LoadWith), since
// the cached slice is shared.
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
	if c != nil {
		c.keep(base, &conv{id: id, msgs: msgs, chunks: count, bytes: size})
	}
	return msgs
}

// seed keeps msgs, which the caller hands over, as the conversation ending
// at id: the one ending at prev ("" for none) and a chunk of bytes after
// it. A prev not cached leaves the chain's length unknown, and nothing is
// kept; the next load reads the chain and keeps it.
func (c *convCache) seed(prev, id string, msgs []results.Message, bytes int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := &conv{id: id, msgs: msgs, chunks: 1, bytes: bytes}
	var base *conv
	if prev != "" {
		var ok bool
		if base, ok = c.lookup(prev); !ok {
			return
		}
		next.chunks, next.bytes = base.chunks+1, base.bytes+bytes
	}
	c.keep(base, next)
}

// keep caches v, in place of base (nil: none): the turn has moved on from
// base, whose conversation lives on as the start of v's. Callers hold mu.
func (c *convCache) keep(base, v *conv) {
	if v.bytes > c.convs.max {
		return
	}
	if base != nil {
		c.convs.remove(base.id)
		c.recent.remove(base.id)
	}
	if v.chunks < minCachedChunks {
		if v.bytes <= c.recent.max {
			c.recent.add(v.id, v, v.bytes)
			for c.recent.order.Len() > recentConvs {
				c.recent.drop(c.recent.order.Back())
			}
		}
		return
	}
	c.convs.add(v.id, v, v.bytes)
}

// forget drops the conversation cached for id, if any.
func (c *convCache) forget(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.convs.remove(id)
	c.recent.remove(id)
}
