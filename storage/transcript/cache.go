package transcript

import (
	"container/list"
	"sync"
)

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
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // of *entry, most recently used first
	byID  map[string]*list.Element
}

type entry struct {
	id   string
	data []byte
}

func newCache(maxBytes int64) *cache {
	if maxBytes <= 0 {
		return nil
	}
	return &cache{max: maxBytes, order: list.New(), byID: map[string]*list.Element{}}
}

// get returns the cached encoding of id. A nil cache holds nothing.
func (c *cache) get(id string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry).data, true
}

func (c *cache) has(id string) bool {
	_, ok := c.get(id)
	return ok
}

// put caches data as id's encoding; a chunk larger than the whole cache
// is not kept. Callers must not change data afterwards.
func (c *cache) put(id string, data []byte) {
	if c == nil || int64(len(data)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.byID[id] = c.order.PushFront(&entry{id: id, data: data})
	c.size += int64(len(data))
	for c.size > c.max {
		oldest := c.order.Back()
		old := oldest.Value.(*entry)
		c.order.Remove(oldest)
		delete(c.byID, old.id)
		c.size -= int64(len(old.data))
	}
}
