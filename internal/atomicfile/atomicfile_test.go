package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteReplacesWholeWithMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token.json")
	require.NoError(t, Write(p, []byte("one"), 0o600))
	require.NoError(t, Write(p, []byte("two"), 0o600))

	got, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "two", string(got))
	info, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), info.Mode().Perm())

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")
}

func TestWriteFailsClearlyAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	err := Write(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600)
	require.ErrorContains(t, err, "create a temporary file beside")

	// Renaming over a directory fails after the temp file was written.
	target := filepath.Join(dir, "adir")
	require.NoError(t, os.Mkdir(target, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(target, "keep"), nil, 0o600))
	err = Write(target, []byte("x"), 0o600)
	require.ErrorContains(t, err, "rename into")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

func TestWriteWithStreamsAndKeepsTheOldFileOnError(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "history.json")
	require.NoError(t, WriteWith(p, func(w io.Writer) error {
		_, err := io.WriteString(w, "whole")
		return err
	}, 0o644))

	boom := errors.New("export failed")
	err := WriteWith(p, func(w io.Writer) error {
		_, _ = io.WriteString(w, "half")
		return boom
	}, 0o644)
	require.ErrorIs(t, err, boom)
	require.Equal(t, boom.Error(), err.Error(), "the writer's error comes back as it is")

	got, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, "whole", string(got))
	info, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o644), info.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")
}
