package blobstore

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob/memblob"
)

var (
	testSpace = Space{Prefix: "things/", Suffix: ".bin"}
	durable   = Space{Prefix: "kept/objects/", Durable: true}
)

func TestDirectoryStoreLayoutAndModes(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), Options{DataDir: dir})
	require.NoError(t, err)
	defer s.Close()

	for _, sp := range []Space{testSpace, durable} {
		sum, err := s.Put(context.Background(), sp, []byte("hello"))
		require.NoError(t, err)
		require.Equal(t, Sum([]byte("hello")), sum)

		// The key layout is the data directory's old one, so stores
		// written before blob URLs existed still read.
		path := filepath.Join(dir, filepath.FromSlash(sp.Prefix), sum[:2], sum[2:]+sp.Suffix)
		info, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(filePerm), info.Mode().Perm())
		info, err = os.Stat(filepath.Dir(path))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(dirPerm), info.Mode().Perm()&^0o022)
		entries, err := os.ReadDir(filepath.Dir(path))
		require.NoError(t, err)
		require.Len(t, entries, 1, "no sidecar or temporary files beside the blob")

		got, err := s.Get(context.Background(), sp, sum)
		require.NoError(t, err)
		require.Equal(t, "hello", string(got))
	}
}

func TestPutIsIdempotentAndRepairs(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenDir(dir, nil)
	require.NoError(t, err)
	ctx := context.Background()
	sum, err := s.Put(ctx, testSpace, []byte("payload"))
	require.NoError(t, err)
	path := filepath.Join(dir, "things", sum[:2], sum[2:]+".bin")
	before, err := os.Stat(path)
	require.NoError(t, err)

	again, err := s.Put(ctx, testSpace, []byte("payload"))
	require.NoError(t, err)
	require.Equal(t, sum, again)
	after, err := os.Stat(path)
	require.NoError(t, err)
	require.True(t, os.SameFile(before, after), "an intact blob is not written again")

	n, size, err := s.Stats(ctx, testSpace)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, int64(len("payload")), size)

	// A damaged blob is replaced by the next Put of the same bytes.
	require.NoError(t, os.WriteFile(path, []byte("pay"), 0o600))
	_, err = s.Get(ctx, testSpace, sum)
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = s.Put(ctx, testSpace, []byte("payload"))
	require.NoError(t, err)
	got, err := s.Get(ctx, testSpace, sum)
	require.NoError(t, err)
	require.Equal(t, "payload", string(got))
}

func TestGetTellsMissingFromCorrupt(t *testing.T) {
	cases := map[string]struct {
		damage func(t *testing.T, path string)
		want   error
	}{
		"deleted": {func(t *testing.T, p string) { require.NoError(t, os.Remove(p)) }, ErrMissing},
		"truncated": {func(t *testing.T, p string) {
			require.NoError(t, os.Truncate(p, 3))
		}, ErrCorrupt},
		"empty": {func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, nil, 0o600)) }, ErrCorrupt},
		"flipped": {func(t *testing.T, p string) {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			data[0] ^= 0xff
			require.NoError(t, os.WriteFile(p, data, 0o600))
		}, ErrCorrupt},
		"a directory in its place": {func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o700))
		}, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenDir(dir, nil)
			require.NoError(t, err)
			sum, err := s.Put(context.Background(), testSpace, []byte("precious bytes"))
			require.NoError(t, err)
			c.damage(t, filepath.Join(dir, "things", sum[:2], sum[2:]+".bin"))
			_, err = s.Get(context.Background(), testSpace, sum)
			require.Error(t, err)
			if c.want == nil {
				// Unreadable: either class makes the caller rebuild,
				// never retry the same read.
				require.True(t, errors.Is(err, ErrMissing) || errors.Is(err, ErrCorrupt), "%v", err)
				return
			}
			require.ErrorIs(t, err, c.want)
			other := ErrCorrupt
			if c.want == ErrCorrupt {
				other = ErrMissing
			}
			require.NotErrorIs(t, err, other)
			require.ErrorContains(t, err, testSpace.Key(sum))
			require.NotContains(t, err.Error(), dir, "no host path in a message that may reach history")
		})
	}
}

func TestGetRefusesBadNames(t *testing.T) {
	s := NewBucket(memblob.OpenBucket(nil), nil)
	for _, name := range []string{"", "abcd", "../../../../etc/passwd", strings.Repeat("AB", 32), strings.Repeat("zz", 32)} {
		_, err := s.Get(context.Background(), testSpace, name)
		require.ErrorContains(t, err, "not a sha256 in hex", name)
		require.NotErrorIs(t, err, ErrMissing)
	}
}

func TestStatsCountsOnlyBlobs(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenDir(dir, nil)
	require.NoError(t, err)
	ctx := context.Background()
	for i := range 3 {
		_, err := s.Put(ctx, testSpace, []byte{byte(i)})
		require.NoError(t, err)
	}
	_, err = s.Put(ctx, durable, []byte("elsewhere"))
	require.NoError(t, err)
	// A temporary file a crashed writer left, and a stray file.
	sub := filepath.Join(dir, "things", "ab")
	require.NoError(t, os.MkdirAll(sub, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(sub, strings.Repeat("c", 62)+".bin.18a2b3c4d5e6f7.tmp"), []byte("half"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "notes.txt"), []byte("x"), 0o600))

	n, size, err := s.Stats(ctx, testSpace)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, int64(3), size)
}

// gcmSealer is what an AES-GCM keyring does: a random nonce per blob, so
// sealing the same plaintext twice gives different bytes.
type gcmSealer struct{ aead cipher.AEAD }

func newGCM(t *testing.T) *gcmSealer {
	key := make([]byte, 32)
	_, err := rand.Read(key)
	require.NoError(t, err)
	block, err := aes.NewCipher(key)
	require.NoError(t, err)
	aead, err := cipher.NewGCM(block)
	require.NoError(t, err)
	return &gcmSealer{aead}
}

func (g *gcmSealer) Seal(p []byte) ([]byte, error) {
	nonce := make([]byte, g.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return g.aead.Seal(nonce, nonce, p, nil), nil
}

func (g *gcmSealer) Open(s []byte) ([]byte, error) {
	n := g.aead.NonceSize()
	if len(s) < n {
		return nil, errors.New("sealed blob too short")
	}
	return g.aead.Open(nil, s[:n], s[n:], nil)
}

func TestSealerSealsAtRestAndNamesByPlaintext(t *testing.T) {
	dir := t.TempDir()
	sealer := newGCM(t)
	s, err := OpenDir(dir, sealer)
	require.NoError(t, err)
	ctx := context.Background()
	plain := []byte("the user's secret conversation")
	sum, err := s.Put(ctx, testSpace, plain)
	require.NoError(t, err)
	require.Equal(t, Sum(plain), sum, "named by the plaintext's hash")

	path := filepath.Join(dir, "things", sum[:2], sum[2:]+".bin")
	stored, err := os.ReadFile(path)
	require.NoError(t, err)
	require.False(t, bytes.Contains(stored, []byte("secret")), "stored sealed")

	got, err := s.Get(ctx, testSpace, sum)
	require.NoError(t, err)
	require.Equal(t, plain, got)

	// Idempotent although sealing is not deterministic.
	_, err = s.Put(ctx, testSpace, plain)
	require.NoError(t, err)
	again, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, stored, again)

	// Another key cannot open it: corrupt, not missing.
	other, err := OpenDir(dir, newGCM(t))
	require.NoError(t, err)
	_, err = other.Get(ctx, testSpace, sum)
	require.ErrorIs(t, err, ErrCorrupt)

	// Without a sealer the stored bytes do not hash to the name.
	plainStore, err := OpenDir(dir, nil)
	require.NoError(t, err)
	_, err = plainStore.Get(ctx, testSpace, sum)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestOpenURLErrorsNameTheVariable(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]struct{ url, want string }{
		"unknown scheme":  {"ftp://host/dir", `unknown scheme "ftp"`},
		"no scheme":       {"/srv/blobs", "has no scheme"},
		"no bucket":       {"s3:///path", "names no bucket"},
		"remote file":     {"file://fileserver/share", "not this machine"},
		"file with query": {"file:///tmp/x?metadata=skip", "no query parameters"},
		"file no dir":     {"file://", "names no directory"},
		"not a URL":       {"s3://bad host/%zz", "is not a URL"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Open(ctx, Options{URL: c.url, DataDir: t.TempDir()})
			require.ErrorContains(t, err, EnvVar)
			require.ErrorContains(t, err, c.want)
		})
	}
	_, err := Open(ctx, Options{})
	require.Error(t, err)
}

func TestOpenURLErrorsHideSecrets(t *testing.T) {
	_, err := Open(context.Background(), Options{URL: "s3://user:hunter2@bucket?endpoint=http://127.0.0.1:1&region=x&profile=secretprofile&bogus=1"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
	require.NotContains(t, err.Error(), "secretprofile")
	require.ErrorContains(t, err, EnvVar)
}

func TestFileURL(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), Options{URL: "file://" + filepath.ToSlash(dir)})
	require.NoError(t, err)
	require.Equal(t, dir, s.Dir())
	sum, err := s.Put(context.Background(), testSpace, []byte("x"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "things", sum[:2], sum[2:]+".bin"))
	require.NoError(t, err)
}

// TestS3CompatibleEndpoint opens the URL form an S3-compatible server
// (MinIO, SeaweedFS, Ceph) takes, against an in-process fake, with
// credentials from the standard AWS variables.
func TestS3CompatibleEndpoint(t *testing.T) {
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("tollgate"))
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "test-access")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	url := "s3://tollgate?endpoint=" + srv.URL + "&use_path_style=true&region=us-east-1&response_checksum_validation=when_required"
	ctx := context.Background()
	s, err := Open(ctx, Options{URL: url})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "s3://tollgate", s.String())

	big := bytes.Repeat([]byte("0123456789abcdef"), 200*1024/16)
	sum, err := s.Put(ctx, testSpace, big)
	require.NoError(t, err)

	// A second process with the same URL reads it.
	s2, err := Open(ctx, Options{URL: url})
	require.NoError(t, err)
	defer s2.Close()
	got, err := s2.Get(ctx, testSpace, sum)
	require.NoError(t, err)
	require.Equal(t, big, got)
	n, size, err := s2.Stats(ctx, testSpace)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, int64(len(big)), size)

	_, err = s2.Get(ctx, testSpace, Sum([]byte("never stored")))
	require.ErrorIs(t, err, ErrMissing)

	// Damage in the bucket is corrupt, not missing, and Put repairs it.
	_, err = backend.DeleteObject("tollgate", testSpace.Key(sum))
	require.NoError(t, err)
	_, err = backend.PutObject("tollgate", testSpace.Key(sum), map[string]string{}, bytes.NewReader([]byte("torn")), 4, nil)
	require.NoError(t, err)
	_, err = s2.Get(ctx, testSpace, sum)
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = s.Put(ctx, testSpace, big)
	require.NoError(t, err)
	got, err = s2.Get(ctx, testSpace, sum)
	require.NoError(t, err)
	require.Equal(t, big, got)

	// A bucket that does not exist is an error to reach the store, not
	// a missing blob to rebuild.
	_, err = Open(ctx, Options{URL: "s3://no-such-bucket?endpoint=" + srv.URL + "&use_path_style=true&region=us-east-1"})
	require.ErrorContains(t, err, "s3://no-such-bucket cannot be used: the bucket does not exist")
	require.ErrorContains(t, err, EnvVar)
}

// Writers of the same blob at once (two workers retrying one activity,
// two turns storing the same first chunk) all succeed, and what is left
// is the blob, whole, with no temporary file beside it.
func TestConcurrentPutsOfOneBlob(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenDir(dir, nil)
	require.NoError(t, err)
	data := bytes.Repeat([]byte("concurrent "), 64<<10)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.Put(t.Context(), testSpace, data) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	got, err := s.Get(t.Context(), testSpace, Sum(data))
	require.NoError(t, err)
	require.Equal(t, data, got)
	entries, err := os.ReadDir(filepath.Dir(filepath.Join(dir, filepath.FromSlash(testSpace.Key(Sum(data))))))
	require.NoError(t, err)
	require.Len(t, entries, 1)
}
