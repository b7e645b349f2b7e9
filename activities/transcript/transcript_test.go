package transcript

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	require.ErrorContains(t, err, "does not match its hash")
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestLoadCorrupt(t *testing.T) {
	// Each case damages the chunk a head names; every one must be reported
	// as ErrCorrupt, which the caller answers by resending the whole
	// conversation, never as an error worth retrying.
	cases := map[string]func(t *testing.T, p string){
		"truncated": func(t *testing.T, p string) {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, data[:len(data)/2], 0o600))
		},
		"empty": func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, nil, 0o600))
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := NewStore(dir)
			require.NoError(t, err)
			h1, err := s.Append("", []results.Message{results.UserText("one")})
			require.NoError(t, err)
			h2, err := s.Append(h1, []results.Message{results.AssistantText("two")})
			require.NoError(t, err)
			// Damage the older chunk: the chain breaks part-way.
			damage(t, filepath.Join(dir, h1[:2], h1[2:]+".json"))
			_, err = s.Load(h2)
			require.ErrorIs(t, err, ErrCorrupt)
			require.NotErrorIs(t, err, ErrMissing)
		})
	}

	t.Run("unreadable", func(t *testing.T) {
		// A directory in the chunk's place fails to read even as root,
		// where permission bits would not. The file store reports it as
		// missing; either class has the caller resend, not retry.
		dir := t.TempDir()
		s, err := NewStore(dir)
		require.NoError(t, err)
		h, err := s.Append("", []results.Message{results.UserText("one")})
		require.NoError(t, err)
		p := filepath.Join(dir, h[:2], h[2:]+".json")
		require.NoError(t, os.Remove(p))
		require.NoError(t, os.Mkdir(p, 0o700))
		_, err = s.Load(h)
		require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrMissing), "%v", err)
	})

	t.Run("bad JSON under its own hash", func(t *testing.T) {
		dir := t.TempDir()
		s, err := NewStore(dir)
		require.NoError(t, err)
		data := []byte("not json")
		sum := sha256.Sum256(data)
		id := hex.EncodeToString(sum[:])
		require.NoError(t, os.MkdirAll(filepath.Join(dir, id[:2]), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, id[:2], id[2:]+".json"), data, 0o600))
		_, err = s.Load(id)
		require.ErrorIs(t, err, ErrCorrupt)
	})
}

func TestAppendRepairsDamagedChunk(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir)
	require.NoError(t, err)
	msgs := []results.Message{results.UserText("one")}
	h, err := s.Append("", msgs)
	require.NoError(t, err)
	p := filepath.Join(dir, h[:2], h[2:]+".json")
	require.NoError(t, os.WriteFile(p, []byte(`{"mess`), 0o600))

	// Storing the same chunk again (the resend after a failed load, or a
	// later turn that reaches the same chunk) must rewrite it rather than
	// trust a file that merely exists.
	again, err := s.Append("", msgs)
	require.NoError(t, err)
	require.Equal(t, h, again)
	got, err := s.Load(h)
	require.NoError(t, err)
	require.Equal(t, []string{"one"}, texts(got))
}

func texts(ms []results.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text()
	}
	return out
}
