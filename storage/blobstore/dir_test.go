package blobstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"
)

// Prepare makes every directory a space's blobs can go in, private, and
// is harmless to run again; a bucket has nothing to prepare.
func TestPrepareMakesASpacesDirectories(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenDir(dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	for range 2 {
		require.NoError(t, s.Prepare(testSpace))
	}
	entries, err := os.ReadDir(filepath.Join(dir, "things"))
	require.NoError(t, err)
	require.Len(t, entries, 256)
	for i, e := range entries {
		require.Equal(t, fmt.Sprintf("%02x", i), e.Name())
		info, err := e.Info()
		require.NoError(t, err)
		require.True(t, info.IsDir())
		require.Equal(t, os.FileMode(dirPerm), info.Mode().Perm())
	}
	sum, err := s.Put(t.Context(), testSpace, []byte("in a prepared directory"))
	require.NoError(t, err)
	got, err := s.Get(t.Context(), testSpace, sum)
	require.NoError(t, err)
	require.Equal(t, "in a prepared directory", string(got))

	require.NoError(t, s.Prepare(durable))
	entries, err = os.ReadDir(filepath.Join(dir, "kept", "objects"))
	require.NoError(t, err)
	require.Len(t, entries, 256)

	// A file where the space's directory should be is an error that
	// says where.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "blocked"), nil, 0o600))
	err = s.Prepare(Space{Prefix: "blocked/"})
	require.ErrorContains(t, err, "prepare the directories of blocked/ in "+dir)

	bucket := NewBucket(memblob.OpenBucket(nil), nil)
	require.NoError(t, bucket.Prepare(testSpace))
}
