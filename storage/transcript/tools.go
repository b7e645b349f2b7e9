package transcript

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/storage/blobstore"
)

// Tool definitions are stored beside the chunks, once per distinct set:
// every model call of a turn offers the model the same tools, and an
// agent with an MCP server's dozens of tools would otherwise carry tens
// of kilobytes of schemas in each call's input, in history. The id is
// the hash of the encoding, so turns with the same tools share one blob.
// They sit beside the chunks under a suffix of their own, so that a
// chunk's id does not name a tool set, nor the other way round, and
// Stats counts chunks alone.

// toolSet is a stored set of tool definitions.
type toolSet struct {
	Tools []model.ToolDef `json:"tools"`
}

// toolSetsBytes bounds the decoded tool sets kept in memory (Store.tools):
// a worker serves few distinct sets (one per agent and tool
// configuration), and each call of every turn reads one.
const toolSetsBytes = 4 << 20

func (s *Store) toolsSpace() blobstore.Space {
	sp := s.space
	sp.Suffix = ".tools" + sp.Suffix
	return sp
}

// PutTools stores a set of tool definitions and returns its id. A set
// this process stored or loaded before is not written again. The store
// keeps tools; callers must not change them afterwards.
func (s *Store) PutTools(ctx context.Context, tools []model.ToolDef) (string, error) {
	if len(tools) == 0 {
		return "", errors.New("store tool definitions: there are none")
	}
	data, err := json.Marshal(toolSet{Tools: tools})
	if err != nil {
		return "", fmt.Errorf("encode tool definitions: %w", err)
	}
	id := blobstore.Sum(data)
	if _, ok := s.tools.get(id); ok {
		return id, nil
	}
	if id, err = s.blobs.Put(ctx, s.toolsSpace(), data); err != nil {
		return "", fmt.Errorf("store tool definitions: %w", err)
	}
	s.tools.put(id, tools, len(data))
	return id, nil
}

// Tools loads the tool definitions PutTools stored under id. A set that
// is missing, damaged or not a tool set wraps ErrMissing or ErrCorrupt,
// as a chunk does: the caller sends the definitions again. The
// definitions are shared with later loads; callers must not change them
// (providers that rename tools copy them first, model.WireNames).
func (s *Store) Tools(ctx context.Context, id string) ([]model.ToolDef, error) {
	if tools, ok := s.tools.get(id); ok {
		return tools, nil
	}
	if !blobstore.ValidSum(id) {
		return nil, fmt.Errorf("tool definitions id %q is malformed: %w", id, ErrMissing)
	}
	data, err := s.read(ctx, s.toolsSpace(), "tool definitions", id)
	if err != nil {
		return nil, err
	}
	// The blob store checked the content against its hash, and only
	// PutTools writes under this suffix.
	var set toolSet
	if err := json.Unmarshal(data, &set); err != nil || set.Tools == nil {
		return nil, fmt.Errorf("load tool definitions %s: not a stored tool set: %w", id, ErrCorrupt)
	}
	s.tools.put(id, set.Tools, len(data))
	return set.Tools, nil
}
