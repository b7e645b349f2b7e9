package transcript

import "sync"

// cache keeps the encodings of recently stored or loaded chunks, up to a
// number of bytes, least recently used out first. A chunk's id is the
// hash of its encoding, so a cached chunk is never stale; Load verified it
// when it came from the store, and Append made it.
//
// It is for remote stores: a chain is read one chunk at a time, since
// each names the one before, and every model call reads the whole chain.
// Against S3 that is a round trip per chunk per model call; with the
// cache, a worker reads only the chunks another worker wrote.
type cache struct {
	mu     sync.Mutex
	chunks *lru[[]byte]
}

func newCache(maxBytes int64) *cache {
	if maxBytes <= 0 {
		return nil
	}
	return &cache{chunks: newLRU[[]byte](maxBytes)}
}

// get returns the cached encoding of id. A nil cache holds nothing.
func (c *cache) get(id string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chunks.get(id)
}

func (c *cache) has(id string) bool {
	_, ok := c.get(id)
	return ok
}

// put caches data as id's encoding; a chunk larger than the whole cache
// is not kept. Callers must not change data afterwards.
func (c *cache) put(id string, data []byte) {
	if c == nil || int64(len(data)) > c.chunks.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.chunks.add(id, data, int64(len(data)))
}
