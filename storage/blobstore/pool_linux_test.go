package blobstore

import (
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
	// The pool starts empty and fills once asked to.
	require.Nil(t, s.pool.take())
	s.pool.refill()
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

// An intact blob keeps its file; a torn one is replaced whole.
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
	limitFileSize(t)
	_, err := s.Put(t.Context(), testSpace, tooLarge())
	require.ErrorIs(t, err, syscall.EFBIG)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// Closing the store closes the files it created ahead and creates no
// more.
func TestClosedStorePoolsNothing(t *testing.T) {
	s, _ := poolFull(t, t.TempDir())
	_, err := s.Put(t.Context(), testSpace, []byte("linked"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Empty(t, s.pool.ready)
	s.pool.mu.Lock()
	require.Empty(t, s.pool.retired, "the files linked as blobs are closed too")
	s.pool.mu.Unlock()
	require.Nil(t, s.pool.take())
	s.pool.refill()
	time.Sleep(20 * time.Millisecond)
	require.Empty(t, s.pool.ready)
}

// A file linked as a blob is closed on the pool's goroutine, not left
// open: a worker would run out of descriptors.
func TestLinkedFilesAreClosed(t *testing.T) {
	s, _ := poolFull(t, t.TempDir())
	var linked []*os.File
	for range poolSize {
		f := <-s.pool.ready
		linked = append(linked, f)
		s.pool.ready <- f
	}
	// The pool hands its files out in order, ahead of those it makes
	// after.
	for i := range poolSize {
		_, err := s.Put(t.Context(), testSpace, []byte(fmt.Sprintf("blob %d", i)))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		s.pool.mu.Lock()
		defer s.pool.mu.Unlock()
		return len(s.pool.retired) == 0 && !s.pool.filling
	}, 5*time.Second, time.Millisecond)
	for _, f := range linked {
		_, err := f.Stat()
		require.ErrorIs(t, err, os.ErrClosed)
	}
}
