package transcript

import "sync"

// cache keeps values by id up to a number of bytes, least recently used
// out first, safe for concurrent use. Ids are hashes of the encodings, so
// a cached value is never stale; it was verified when it came from the
// store, or made by this process.
//
// The chunk cache is for remote stores: a chain is read one chunk at a
// time, since each names the one before, and every model call reads the
// whole chain. Against S3 that is a round trip per chunk per model call;
// with the cache, a worker reads only the chunks another worker wrote.
type cache[V any] struct {
	mu    sync.Mutex
	items *lru[V]
}

// newCache keeps up to maxBytes; zero or less keeps nothing (a nil
// cache).
func newCache[V any](maxBytes int64) *cache[V] {
	if maxBytes <= 0 {
		return nil
	}
	return &cache[V]{items: newLRU[V](maxBytes)}
}

// get returns the value cached for id. A nil cache holds nothing.
func (c *cache[V]) get(id string) (V, bool) {
	if c == nil {
		var zero V
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.items.get(id)
}

func (c *cache[V]) has(id string) bool {
	_, ok := c.get(id)
	return ok
}

// put caches v for id, counting size bytes; a value larger than the whole
// cache is not kept. Callers must not change v afterwards.
func (c *cache[V]) put(id string, v V, size int) {
	if c == nil || int64(size) > c.items.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items.add(id, v, int64(size))
}
