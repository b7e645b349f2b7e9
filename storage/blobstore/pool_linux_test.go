package blobstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// poolFull opens a directory store and waits until its pool holds
// poolSize files created ahead, returning their inodes.
func poolFull(t *testing.T, dir string) (*Store, map[uint64]bool) {
	t.Helper()
	s, err := OpenDir(dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	// The first take starts the pool; it has nothing to give yet.
	require.Nil(t, s.pool.take())
	require.Eventually(t, func() bool { return len(s.pool.ready) == poolSize }, 5*time.Second, time.Millisecond)
	inodes := map[uint64]bool{}
	for range poolSize {
		f := <-s.pool.ready
		info, err := f.Stat()
		require.NoError(t, err)
		inodes[info.Sys().(*syscall.Stat_t).Ino] = true
		s.pool.ready <- f
	}
	return s, inodes
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	return info.Sys().(*syscall.Stat_t).Ino
}

// A new blob is a file created ahead, linked under its name: whole,
// private, and with nothing beside it in its directory or the store's.
func TestNewBlobsAreFilesCreatedAhead(t *testing.T) {
	dir := t.TempDir()
	s, ahead := poolFull(t, dir)
	for _, sp := range []Space{testSpace, durable} {
		data := []byte("created ahead " + sp.Prefix)
		sum, err := s.Put(t.Context(), sp, data)
		require.NoError(t, err)
		path := filepath.Join(dir, filepath.FromSlash(sp.Key(sum)))
		require.True(t, ahead[inode(t, path)], "the blob is one of the pool's files")
		info, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(filePerm), info.Mode().Perm())
		entries, err := os.ReadDir(filepath.Dir(path))
		require.NoError(t, err)
		require.Len(t, entries, 1)
		got, err := s.Get(t.Context(), sp, sum)
		require.NoError(t, err)
		require.Equal(t, data, got)
	}
	roots, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range roots {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"things", "kept"}, names, "files created ahead have no names")

	// Many blobs in a row: the pool refills and runs dry, and every blob
	// reads back whole either way.
	for i := range 50 {
		data := []byte(fmt.Sprintf("blob %d", i))
		sum, err := s.Put(t.Context(), testSpace, data)
		require.NoError(t, err)
		got, err := s.Get(t.Context(), testSpace, sum)
		require.NoError(t, err)
		require.Equal(t, data, got)
	}
}

// An intact blob keeps its file and the pooled file goes back unused; a
// torn one is replaced whole.
func TestPooledPutOfAStoredBlob(t *testing.T) {
	dir := t.TempDir()
	s, _ := poolFull(t, dir)
	sum, err := s.Put(t.Context(), testSpace, []byte("payload"))
	require.NoError(t, err)
	path := filepath.Join(dir, filepath.FromSlash(testSpace.Key(sum)))
	before := inode(t, path)
	require.Eventually(t, func() bool { return len(s.pool.ready) == poolSize }, 5*time.Second, time.Millisecond)
	_, err = s.Put(t.Context(), testSpace, []byte("payload"))
	require.NoError(t, err)
	require.Equal(t, before, inode(t, path), "an intact blob is not written again")
	require.Len(t, s.pool.ready, poolSize, "the unused file went back to the pool")

	require.NoError(t, os.WriteFile(path, []byte("pay"), 0o600))
	_, err = s.Put(t.Context(), testSpace, []byte("payload"))
	require.NoError(t, err)
	got, err := s.Get(t.Context(), testSpace, sum)
	require.NoError(t, err)
	require.Equal(t, "payload", string(got))
}

// A write that fails through a pooled file leaves nothing named anywhere
// in the store.
func TestFailedPooledWriteLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	s, _ := poolFull(t, dir)
	limitFileSize(t, 64<<10)
	_, err := s.Put(t.Context(), testSpace, bytes.Repeat([]byte("x"), 256<<10))
	require.ErrorIs(t, err, syscall.EFBIG)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// Closing the store closes the files it created ahead and creates no
// more.
func TestClosedStorePoolsNothing(t *testing.T) {
	s, _ := poolFull(t, t.TempDir())
	require.NoError(t, s.Close())
	require.Empty(t, s.pool.ready)
	require.Nil(t, s.pool.take())
	time.Sleep(20 * time.Millisecond)
	require.Empty(t, s.pool.ready)
}
