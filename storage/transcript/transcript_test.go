package transcript

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/blobstore"
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

// memStore is a store in a bucket, as on a remote blob URL, and the
// bucket, so a test can take blobs away behind the store's back.
func memStore(t *testing.T, o Options) (*Store, *blob.Bucket) {
	t.Helper()
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { b.Close() })
	return New(blobstore.NewBucket(b, nil), o), b
}

// With a cache, a worker reads back neither what it stored nor what it
// read before: loads succeed with the bucket emptied. Another worker
// (no cache of its own) still finds the chunks missing, as before.
func TestCacheServesStoredAndLoadedChunks(t *testing.T) {
	ctx := context.Background()
	writer, bucket := memStore(t, Options{CacheBytes: 1 << 20})
	h1, err := writer.Append("", []results.Message{results.UserText("one")})
	require.NoError(t, err)
	h2, err := writer.Append(h1, []results.Message{results.AssistantText("two")})
	require.NoError(t, err)

	reader := New(blobstore.NewBucket(bucket, nil), Options{CacheBytes: 1 << 20})
	got, err := reader.Load(h2)
	require.NoError(t, err)
	require.Equal(t, []string{"one", "two"}, texts(got))

	emptyBucket(t, bucket)
	for name, s := range map[string]*Store{"writer": writer, "reader": reader} {
		got, err := s.LoadContext(ctx, h2)
		require.NoError(t, err, name)
		require.Equal(t, []string{"one", "two"}, texts(got), name)
	}
	uncached := New(blobstore.NewBucket(bucket, nil), Options{})
	_, err = uncached.Load(h2)
	require.ErrorIs(t, err, ErrMissing)

	// A chain the reader knows only the start of: the new chunk comes
	// from the store, the rest from memory.
	h3, err := New(blobstore.NewBucket(bucket, nil), Options{}).Append(h2, []results.Message{results.UserText("three")})
	require.NoError(t, err)
	got, err = reader.Load(h3)
	require.NoError(t, err)
	require.Equal(t, []string{"one", "two", "three"}, texts(got))
}

// The cache holds at most its size, dropping the least recently used
// chunk; what it dropped is read from the store again.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	msgs := func(text string) []results.Message {
		return []results.Message{results.UserText(strings.Repeat(text, 60))}
	}
	one, err := json.Marshal(chunk{Messages: msgs("a")})
	require.NoError(t, err)
	// Room for two chunks, not three.
	s, bucket := memStore(t, Options{CacheBytes: int64(len(one)) * 5 / 2})
	var heads []string
	for _, text := range []string{"a", "b", "c"} {
		h, err := s.Append("", msgs(text))
		require.NoError(t, err)
		heads = append(heads, h)
	}
	emptyBucket(t, bucket)
	_, err = s.Load(heads[0])
	require.ErrorIs(t, err, ErrMissing, "the oldest chunk was evicted")
	for _, h := range heads[1:] {
		_, err := s.Load(h)
		require.NoError(t, err, "the newest chunks are cached")
	}
	require.LessOrEqual(t, s.chunks.items.size, s.chunks.items.max)

	// A chunk larger than the whole cache is never kept.
	big, err := s.Append("", []results.Message{results.UserText(strings.Repeat("x", 4*len(one)))})
	require.NoError(t, err)
	emptyBucket(t, bucket)
	_, err = s.Load(big)
	require.ErrorIs(t, err, ErrMissing)
	for _, h := range heads[1:] {
		_, err := s.Load(h)
		require.NoError(t, err, "a chunk too large to cache evicts nothing")
	}
}

// A damaged chunk read from the store is reported, and not cached: once
// it is stored again intact, it loads.
func TestCacheKeepsNothingUnverified(t *testing.T) {
	writer, bucket := memStore(t, Options{})
	h, err := writer.Append("", []results.Message{results.UserText("one")})
	require.NoError(t, err)
	key := Space.Key(h)
	ctx := context.Background()
	data, err := bucket.ReadAll(ctx, key)
	require.NoError(t, err)
	require.NoError(t, bucket.WriteAll(ctx, key, data[:len(data)/2], nil))

	reader := New(blobstore.NewBucket(bucket, nil), Options{CacheBytes: 1 << 20})
	_, err = reader.Load(h)
	require.ErrorIs(t, err, ErrCorrupt)
	require.NoError(t, bucket.WriteAll(ctx, key, data, nil))
	got, err := reader.Load(h)
	require.NoError(t, err)
	require.Equal(t, []string{"one"}, texts(got))
}

func emptyBucket(t *testing.T, b *blob.Bucket) {
	t.Helper()
	ctx := context.Background()
	iter := b.List(nil)
	for {
		obj, err := iter.Next(ctx)
		if err == io.EOF {
			return
		}
		require.NoError(t, err)
		require.NoError(t, b.Delete(ctx, obj.Key))
	}
}

// Storing a chunk the cache holds (an activity retry on the same worker)
// costs no read or write of the bucket. The bucket is emptied behind the
// store's back only to show that the retry never reached it.
func TestCachedChunkIsNotStoredAgain(t *testing.T) {
	s, bucket := memStore(t, Options{CacheBytes: 1 << 20})
	msgs := []results.Message{results.UserText("one")}
	h, err := s.Append("", msgs)
	require.NoError(t, err)
	emptyBucket(t, bucket)
	again, err := s.Append("", msgs)
	require.NoError(t, err)
	require.Equal(t, h, again)
	exists, err := bucket.Exists(context.Background(), Space.Key(h))
	require.NoError(t, err)
	require.False(t, exists, "the retry did not go to the bucket")
}
