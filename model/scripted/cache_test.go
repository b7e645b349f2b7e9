package scripted

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

func reply(t *testing.T, p *Provider) string {
	t.Helper()
	resp, err := p.Complete(t.Context(), model.Request{Messages: []results.Message{results.UserText("hi")}})
	require.NoError(t, err)
	return resp.Message.Parts[0].Text
}

// writeScript writes a script replying text as path.
func writeScript(t testing.TB, path, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(`{"replies":[{"text":"`+text+`"}]}`), 0o600))
}

// played resolves ref and checks that its provider replies want.
func played(t *testing.T, s *Scripts, ref, want string) *Provider {
	t.Helper()
	p, err := s.Provider(ref)
	require.NoError(t, err)
	require.Equal(t, want, reply(t, p))
	return p
}

// A worker's scripts are parsed once and played until their file
// changes, whichever way it changes.
func TestScriptsPlayAFileUntilItChanges(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.json")
	write := func(text string) { writeScript(t, file, text) }
	write("one")
	s := NewScripts(dir)

	first := played(t, s, "s.json", "one")
	require.Same(t, first, played(t, s, "s.json", "one"), "an unchanged file is not parsed again")

	// Edited in place, to a text of another length.
	write("three")
	played(t, s, "s.json", "three")

	// Edited in place to the same length: the modification time tells.
	write("seven")
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(file, later, later))
	played(t, s, "s.json", "seven")

	// Replaced by another file of the same size and time.
	info, err := os.Stat(file)
	require.NoError(t, err)
	other := filepath.Join(dir, "other.json")
	writeScript(t, other, "eight")
	require.NoError(t, os.Chtimes(other, info.ModTime(), info.ModTime()))
	require.NoError(t, os.Rename(other, file))
	played(t, s, "s.json", "eight")

	// Removed: the script is gone, not played from memory.
	require.NoError(t, os.Remove(file))
	_, err = s.Provider("s.json")
	require.ErrorContains(t, err, "read script")
}

// The scripts directory is held open between calls; one moved aside and
// replaced under its name is the new one, whose scripts are played.
func TestScriptsFollowAReplacedDirectory(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "scripts")
	write := func(text string) {
		require.NoError(t, os.MkdirAll(dir, 0o700))
		writeScript(t, filepath.Join(dir, "s.json"), text)
	}
	write("old")
	s := NewScripts(dir)
	old := played(t, s, "s.json", "old")
	require.Same(t, old, played(t, s, "s.json", "old"), "an unchanged file in the directory held open is not parsed again")

	require.NoError(t, os.Rename(dir, filepath.Join(base, "scripts.old")))
	write("new")
	played(t, s, "s.json", "new")

	require.NoError(t, os.RemoveAll(dir))
	_, err := s.Provider("s.json")
	require.ErrorContains(t, err, "read script")
}

// The confinement rule holds at every call, not only the first: a file
// played once and then swapped for a link out of the directory is refused.
func TestScriptsConfineEveryCall(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "scripts")
	require.NoError(t, os.Mkdir(dir, 0o700))
	script := []byte(`{"replies":[{"text":"hi"}]}`)
	outside := filepath.Join(base, "outside.json")
	require.NoError(t, os.WriteFile(outside, script, 0o600))
	file := filepath.Join(dir, "s.json")
	require.NoError(t, os.WriteFile(file, script, 0o600))
	s := NewScripts(dir)

	_, err := s.Provider("s.json")
	require.NoError(t, err)
	require.NoError(t, os.Remove(file))
	require.NoError(t, os.Symlink(outside, file))
	_, err = s.Provider("s.json")
	require.ErrorIs(t, err, ErrNotAllowed)

	_, err = s.Provider("../outside.json")
	require.ErrorIs(t, err, ErrNotAllowed)
}

func TestScriptsPlayBuiltins(t *testing.T) {
	s := NewScripts("")
	p, err := s.Provider("demo")
	require.NoError(t, err)
	again, err := s.Provider("demo")
	require.NoError(t, err)
	require.Same(t, p, again)
	_, err = s.Provider("nosuch")
	require.ErrorContains(t, err, `no built-in script "nosuch"`)
	_, err = s.Provider("s.json")
	require.ErrorIs(t, err, ErrNotAllowed)
}

// BenchmarkScriptsFile is what a model call pays to find its script file
// unchanged.
func BenchmarkScriptsFile(b *testing.B) {
	dir := b.TempDir()
	writeScript(b, filepath.Join(dir, "s.json"), "hi")
	s := NewScripts(dir)
	for b.Loop() {
		if _, err := s.Provider("s.json"); err != nil {
			b.Fatal(err)
		}
	}
}
