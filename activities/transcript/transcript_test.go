package transcript

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

func TestAppendAndLoadChain(t *testing.T) {
	s, err := NewStore(t.TempDir())
	require.NoError(t, err)

	h1, err := s.Append("", []results.Message{results.UserText("one")})
	require.NoError(t, err)
	h2, err := s.Append(h1, []results.Message{results.AssistantText("two"), results.UserText("three")})
	require.NoError(t, err)
	require.NotEqual(t, h1, h2)

	got, err := s.Load(h2)
	require.NoError(t, err)
	require.Equal(t, []string{"one", "two", "three"}, texts(got))

	// Storing the same chunk again (an activity retry) yields the same id
	// and no new file.
	again, err := s.Append(h1, []results.Message{results.AssistantText("two"), results.UserText("three")})
	require.NoError(t, err)
	require.Equal(t, h2, again)
	n, _, err := s.Stats()
	require.NoError(t, err)
	require.Equal(t, 2, n)

	empty, err := s.Load("")
	require.NoError(t, err)
	require.Empty(t, empty)
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir)
	require.NoError(t, err)
	h, err := s.Append("", []results.Message{results.UserText("x")})
	require.NoError(t, err)

	_, err = s.Load("not-an-id")
	require.ErrorContains(t, err, "malformed")

	other, err := NewStore(t.TempDir())
	require.NoError(t, err)
	_, err = other.Load(h)
	require.ErrorIs(t, err, ErrMissing)

	require.NoError(t, os.WriteFile(filepath.Join(dir, h[:2], h[2:]+".json"), []byte(`{"messages":[]}`), 0o600))
	_, err = s.Load(h)
	require.ErrorContains(t, err, "does not match its id")
}

func texts(ms []results.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text()
	}
	return out
}
