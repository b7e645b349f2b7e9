package tool

import (
	"encoding/json"
	"sync"
)

// maxShared bounds the schemas CompileShared keeps; past it the cache
// starts over, so schemas a worker no longer sees do not pile up.
const maxShared = 1024

// shared holds compiled schemas by their bytes.
var shared struct {
	sync.Mutex
	m map[string]*Schema
}

// CompileShared is CompileSchema for callers that compile the same schema
// many times, such as every turn of a worker recording the same tool
// specs: a schema compiles once per process, and every caller gets the
// same *Schema. A compiled schema is never changed after compilation and
// Validate only reads it, so sharing it is safe, and workflow code may
// use it: the result depends on the schema bytes alone, not on what ran
// before. Errors are not kept.
func CompileShared(raw json.RawMessage) (*Schema, error) {
	key := string(raw)
	shared.Lock()
	s, ok := shared.m[key]
	shared.Unlock()
	if ok {
		return s, nil
	}
	s, err := CompileSchema(raw)
	if err != nil {
		return nil, err
	}
	shared.Lock()
	defer shared.Unlock()
	if shared.m == nil || len(shared.m) >= maxShared {
		shared.m = map[string]*Schema{}
	}
	if prev, ok := shared.m[key]; ok {
		return prev, nil
	}
	shared.m[key] = s
	return s, nil
}
