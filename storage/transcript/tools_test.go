package transcript

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

func sampleTools() []model.ToolDef {
	return []model.ToolDef{
		{Name: "read_file", Description: "Reads a file.", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Name: "noop", Description: "Does nothing.", Schema: json.RawMessage(`{"type":"object"}`)},
	}
}

func TestToolsStoredOnceAndLoaded(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir)
	require.NoError(t, err)
	id, err := s.PutTools(t.Context(), sampleTools())
	require.NoError(t, err)
	again, err := s.PutTools(t.Context(), sampleTools())
	require.NoError(t, err)
	require.Equal(t, id, again, "the same set has the same id")
	files, err := filepath.Glob(filepath.Join(dir, id[:2], "*.tools.json"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one blob for the set")
	n, _, err := s.Stats()
	require.NoError(t, err)
	require.Zero(t, n, "a tool set is not a chunk")

	// Another process (a fresh store on the same directory) reads it.
	other, err := NewStore(dir)
	require.NoError(t, err)
	got, err := other.Tools(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, sampleTools(), got)

	different, err := s.PutTools(t.Context(), sampleTools()[:1])
	require.NoError(t, err)
	require.NotEqual(t, id, different)

	_, err = s.PutTools(t.Context(), nil)
	require.ErrorContains(t, err, "there are none")
}

func TestToolsLoadErrors(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir)
	require.NoError(t, err)

	_, err = s.Tools(t.Context(), "../../etc/passwd")
	require.ErrorIs(t, err, ErrMissing, "a malformed id never reaches the file system")

	_, err = s.Tools(t.Context(), "0000000000000000000000000000000000000000000000000000000000000000")
	require.ErrorIs(t, err, ErrMissing)

	// A chunk's id names no tool set, nor a tool set's a chunk.
	head, err := s.Append("", []results.Message{results.UserText("hello")})
	require.NoError(t, err)
	_, err = s.Tools(t.Context(), head)
	require.ErrorIs(t, err, ErrMissing)

	// A damaged set, read by a process that has not cached it.
	id, err := s.PutTools(t.Context(), sampleTools())
	require.NoError(t, err)
	_, err = s.Load(id)
	require.ErrorIs(t, err, ErrMissing)
	require.NoError(t, os.WriteFile(filepath.Join(dir, id[:2], id[2:]+".tools.json"), []byte(`{"tools":[{"name":"evil"}]}`), 0o600))
	fresh, err := NewStore(dir)
	require.NoError(t, err)
	_, err = fresh.Tools(t.Context(), id)
	require.ErrorIs(t, err, ErrCorrupt, "the content no longer matches its hash")
}
