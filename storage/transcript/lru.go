package transcript

import "container/list"

// lru holds values by key up to a total size, least recently used out
// first. It does no locking: the caches built on it hold their own lock
// around each use.
type lru[V any] struct {
	max, size int64
	order     *list.List // of *lruEntry[V], most recently used first
	byKey     map[string]*list.Element
}

type lruEntry[V any] struct {
	key  string
	val  V
	size int64
}

func newLRU[V any](maxSize int64) *lru[V] {
	return &lru[V]{max: maxSize, order: list.New(), byKey: map[string]*list.Element{}}
}

// get returns key's value and marks it the most recently used.
func (l *lru[V]) get(key string) (V, bool) {
	e, ok := l.byKey[key]
	if !ok {
		var zero V
		return zero, false
	}
	l.order.MoveToFront(e)
	return e.Value.(*lruEntry[V]).val, true
}

// add keeps val under key, taking size of the whole, and drops the least
// recently used values until the rest fits. A key already held keeps its
// value and becomes the most recently used.
func (l *lru[V]) add(key string, val V, size int64) {
	if e, ok := l.byKey[key]; ok {
		l.order.MoveToFront(e)
		return
	}
	l.byKey[key] = l.order.PushFront(&lruEntry[V]{key: key, val: val, size: size})
	l.size += size
	for l.size > l.max {
		oldest := l.order.Back()
		l.drop(oldest)
	}
}

// remove drops key's value, if held.
func (l *lru[V]) remove(key string) {
	if e, ok := l.byKey[key]; ok {
		l.drop(e)
	}
}

func (l *lru[V]) drop(e *list.Element) {
	old := e.Value.(*lruEntry[V])
	l.order.Remove(e)
	delete(l.byKey, old.key)
	l.size -= old.size
}
