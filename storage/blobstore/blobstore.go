// Package blobstore keeps content-addressed blobs (externally stored
// Temporal payloads, large tool outputs, conversation transcripts) in a
// bucket chosen by URL, through gocloud.dev/blob:
//
//	(unset)                                  the data directory, as before
//	file:///srv/tollgate                     a directory (local or a shared mount)
//	s3://bucket?region=us-east-1             Amazon S3
//	s3://bucket?endpoint=http://host:8333&use_path_style=true&region=us-east-1
//	                                         S3-compatible: MinIO, SeaweedFS, Ceph, R2
//	gs://bucket                              Google Cloud Storage
//	azblob://container                       Azure Blob Storage
//
// Every worker, every client that reads turns (the starter, the gateway)
// and every replayer must be given the same URL: a history names its
// payloads by hash, and only the store that holds them can resolve them.
// Credentials never go in the URL: s3 reads the standard AWS variables
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_PROFILE, ...),
// gs the Application Default Credentials, azblob AZURE_STORAGE_ACCOUNT and
// AZURE_STORAGE_KEY (or the other variables azureblob documents).
//
// A blob's key is its space's prefix, then the hex SHA-256 of its
// plaintext split after two characters, then the space's suffix:
// payloads/objects/ab/cdef…, transcripts/ab/cdef….json. That is the
// layout the data directory always had, so the default store (the data
// directory itself) reads what older versions wrote, and copying a data
// directory's payloads/ and transcripts/ into a bucket moves them.
//
// Reads verify the hash: a blob that is absent is ErrMissing, one whose
// bytes do not hash to its key (a torn write, a bad disk, an edit) or that
// the Sealer cannot open is ErrCorrupt. Writes are idempotent: a blob
// already stored intact is not written again, and a damaged one is
// replaced.
package blobstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob:// URLs
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob" // gs:// URLs
	_ "gocloud.dev/blob/s3blob"  // s3:// URLs
	"gocloud.dev/gcerrors"
)

// EnvVar names the environment variable that chooses the blob store.
const EnvVar = "TOLLGATE_BLOB_URL"

// Files and directories a directory store creates are private to the
// user: blobs hold conversation content.
const (
	filePerm = 0o600
	dirPerm  = 0o700
)

// ErrMissing and ErrCorrupt classify Get failures; any other error is a
// failure to reach the store, which may pass.
var (
	ErrMissing = errors.New("blob is missing")
	ErrCorrupt = errors.New("blob is corrupt")
)

// Sealer encrypts blobs at rest. Seal is applied to a blob's plaintext
// before it is stored and Open to the stored bytes after they are read;
// keys are hashes of the plaintext, so sealing need not be deterministic.
type Sealer interface {
	Seal(plaintext []byte) ([]byte, error)
	Open(sealed []byte) ([]byte, error)
}

// Space is one use of a store: the keys of its blobs are
// Prefix + hash[:2] + "/" + hash[2:] + Suffix.
type Space struct {
	Prefix string
	Suffix string
	// Durable has a directory store sync each blob and its directory
	// before Put returns, for blobs nothing else could recreate (payloads
	// a history names). Content addressing already detects a blob torn by
	// a crash, so blobs the caller can rewrite (transcripts) skip it.
	// Remote stores are durable when a write returns.
	Durable bool
}

// Options choose and configure a store.
type Options struct {
	// URL chooses the store; empty is a directory store in DataDir.
	URL string
	// DataDir is the directory the default store lives in.
	DataDir string
	// Sealer, if set, seals what is stored and opens what is read.
	Sealer Sealer
}

// URLFromEnv is the blob URL TOLLGATE_BLOB_URL names, or "". getenv is
// os.Getenv, or a stand-in in tests.
func URLFromEnv(getenv func(string) string) string { return getenv(EnvVar) }

// Store is a bucket of content-addressed blobs.
type Store struct {
	bucket *blob.Bucket
	sealer Sealer
	// dir is the root of a directory store, "" for others: a directory
	// store reads and writes its files itself (dir.go), with files
	// created ahead from pool.
	dir  string
	pool *filePool
	// where names the store in errors: a path or a URL without its query
	// and user info.
	where string
}

// Open opens the store o chooses. Its errors name TOLLGATE_BLOB_URL and
// say what is wrong with the URL.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.URL == "" {
		if o.DataDir == "" {
			return nil, errors.New("blobstore: neither a blob URL nor a data directory is given")
		}
		return OpenDir(o.DataDir, o.Sealer)
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("blobstore: %s is not a URL: %w", EnvVar, err)
	}
	where := redact(u)
	switch u.Scheme {
	case "file":
		dir, err := fileDir(u)
		if err != nil {
			return nil, fmt.Errorf("blobstore: %s %s: %w", EnvVar, where, err)
		}
		return OpenDir(dir, o.Sealer)
	case "s3", "gs", "azblob":
		if u.Host == "" {
			return nil, fmt.Errorf("blobstore: %s %s names no bucket (%s://BUCKET)", EnvVar, where, u.Scheme)
		}
	case "":
		return nil, fmt.Errorf("blobstore: %s %q has no scheme; use file:///DIR, s3://BUCKET, gs://BUCKET or azblob://CONTAINER", EnvVar, where)
	default:
		return nil, fmt.Errorf("blobstore: %s %s: unknown scheme %q; use file://, s3://, gs:// or azblob://", EnvVar, where, u.Scheme)
	}
	b, err := blob.OpenBucket(ctx, o.URL)
	if err != nil {
		// The driver's message repeats the whole URL; keep its query and
		// user info out of logs.
		msg := strings.ReplaceAll(err.Error(), o.URL, where)
		return nil, fmt.Errorf("blobstore: open %s %s: %s", EnvVar, where, msg)
	}
	// Fail at start, not at the first large payload: a bucket that does
	// not exist would otherwise read as blobs that are missing.
	checkCtx, cancel := context.WithTimeout(ctx, accessTimeout)
	defer cancel()
	ok, err := b.IsAccessible(checkCtx)
	if err == nil && !ok {
		err = errors.New("the bucket does not exist")
	}
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("blobstore: %s %s cannot be used: %s", EnvVar, where, strings.ReplaceAll(err.Error(), o.URL, where))
	}
	return &Store{bucket: b, sealer: o.Sealer, where: where}, nil
}

// accessTimeout bounds the check Open makes that a bucket is there.
const accessTimeout = 30 * time.Second

// OpenDir opens (creating if needed) a directory store rooted at dir.
func OpenDir(dir string, sealer Sealer) (*Store, error) {
	if dir == "" {
		return nil, errors.New("blobstore: directory is empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blobstore: resolve %s: %w", dir, err)
	}
	b, err := fileblob.OpenBucket(abs, &fileblob.Options{
		CreateDir:   true,
		DirFileMode: dirPerm,
		// Beside the blob, so the rename into place never crosses a
		// mount, and no sidecar files of attributes nobody reads.
		NoTempDir: true,
		Metadata:  fileblob.MetadataDontWrite,
	})
	if err != nil {
		return nil, fmt.Errorf("blobstore: open directory %s: %w", abs, err)
	}
	return &Store{bucket: b, sealer: sealer, dir: abs, pool: newFilePool(abs), where: abs}, nil
}

// NewBucket wraps a bucket opened elsewhere (memblob in tests, a bucket
// with options a URL cannot carry).
func NewBucket(b *blob.Bucket, sealer Sealer) *Store {
	return &Store{bucket: b, sealer: sealer, where: "bucket"}
}

// String names the store: a directory, or the URL without its query.
func (s *Store) String() string { return s.where }

// Dir is the root of a directory store, "" for a bucket.
func (s *Store) Dir() string { return s.dir }

// Close releases the bucket.
func (s *Store) Close() error {
	if s.pool != nil {
		s.pool.close()
	}
	return s.bucket.Close()
}

// Key is where the blob with hash sum lives in sp.
func (sp Space) Key(sum string) string {
	return sp.Prefix + sum[:2] + "/" + sum[2:] + sp.Suffix
}

// Sum is the hex SHA-256 of data: its blob's name.
func Sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// ValidSum reports whether sum is a lower-case hex SHA-256, which keeps a
// name read from history from reaching outside the store.
func ValidSum(sum string) bool {
	if len(sum) != sha256.Size*2 {
		return false
	}
	for _, c := range sum {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Put stores data in sp, unless it is already there intact, and returns
// its hash.
func (s *Store) Put(ctx context.Context, sp Space, data []byte) (string, error) {
	sum := Sum(data)
	key := sp.Key(sum)
	if s.dir != "" {
		stored, err := s.seal(sum, data)
		if err != nil {
			return "", err
		}
		intact := func(b []byte) bool { _, err := s.check(key, sum, b); return err == nil }
		if err := s.putFile(key, stored, sp.Durable, intact); err != nil {
			return "", fmt.Errorf("store blob %s in %s: %w", key, s.where, err)
		}
		return sum, nil
	}
	// Storing again is common (an activity retry, a conversation prefix
	// sent again); a damaged blob is rewritten rather than trusted for
	// ever by every later reference.
	if _, err := s.Get(ctx, sp, sum); err == nil {
		return sum, nil
	} else if !errors.Is(err, ErrMissing) && !errors.Is(err, ErrCorrupt) {
		return "", err
	}
	stored, err := s.seal(sum, data)
	if err != nil {
		return "", err
	}
	if err := s.write(ctx, key, stored); err != nil {
		return "", fmt.Errorf("store blob %s in %s: %w", key, s.where, err)
	}
	return sum, nil
}

// seal is data as stored: sealed, when the store has a Sealer.
func (s *Store) seal(sum string, data []byte) ([]byte, error) {
	if s.sealer == nil {
		return data, nil
	}
	stored, err := s.sealer.Seal(data)
	if err != nil {
		return nil, fmt.Errorf("seal blob %s: %w", sum, err)
	}
	return stored, nil
}

// write stores data under key in a bucket, which holds it durably once
// Close returns.
func (s *Store) write(ctx context.Context, key string, data []byte) error {
	// Close commits whatever was written, a partial blob too; only a
	// writer whose context is cancelled first aborts (gocloud.dev/blob's
	// NewWriter contract), leaving nothing under key.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A content type given skips sniffing.
	w, err := s.bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		cancel()
		_ = w.Close()
		return err
	}
	return w.Close()
}

// Get reads the blob with hash sum from sp and checks that it is what the
// hash names.
func (s *Store) Get(ctx context.Context, sp Space, sum string) ([]byte, error) {
	if !ValidSum(sum) {
		return nil, fmt.Errorf("blob name %q is not a sha256 in hex", sum)
	}
	key := sp.Key(sum)
	// Messages name the blob, not the directory: a read failure can end
	// up in workflow history, which holds no host paths.
	if s.dir != "" {
		data, err := s.readFile(key)
		if err != nil {
			return nil, err
		}
		return s.check(key, sum, data)
	}
	data, err := s.bucket.ReadAll(ctx, key)
	switch {
	case gcerrors.Code(err) == gcerrors.NotFound:
		return nil, fmt.Errorf("blob %s: %w", key, ErrMissing)
	case err != nil:
		return nil, fmt.Errorf("read blob %s from %s: %w", key, s.where, err)
	}
	return s.check(key, sum, data)
}

// check opens stored bytes read from key and checks that they hash to sum.
func (s *Store) check(key, sum string, data []byte) ([]byte, error) {
	if s.sealer != nil {
		var err error
		if data, err = s.sealer.Open(data); err != nil {
			return nil, fmt.Errorf("blob %s cannot be opened (%v): %w", key, err, ErrCorrupt)
		}
	}
	if Sum(data) != sum {
		return nil, fmt.Errorf("blob %s does not match its hash: %w", key, ErrCorrupt)
	}
	return data, nil
}

// Stats counts the blobs in sp and their stored bytes, for benchmarks that
// measure how storage grows per step. Temporary files a crashed writer
// left are not blobs and are not counted.
func (s *Store) Stats(ctx context.Context, sp Space) (blobs int, size int64, err error) {
	it := s.bucket.List(&blob.ListOptions{Prefix: sp.Prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return blobs, size, nil
		}
		if err != nil {
			return 0, 0, fmt.Errorf("blobstore: list %s in %s: %w", sp.Prefix, s.where, err)
		}
		if obj.IsDir || !sp.isKey(obj.Key) {
			continue
		}
		blobs++
		size += obj.Size
	}
}

// isKey reports whether key is a blob's key in sp.
func (sp Space) isKey(key string) bool {
	rest, ok := strings.CutPrefix(key, sp.Prefix)
	if !ok {
		return false
	}
	if rest, ok = strings.CutSuffix(rest, sp.Suffix); !ok || len(rest) != sha256.Size*2+1 || rest[2] != '/' {
		return false
	}
	return ValidSum(rest[:2] + rest[3:])
}

// fileDir is the directory a file:// URL names. Query parameters are
// refused: the store sets its own (private modes, no sidecars).
func fileDir(u *url.URL) (string, error) {
	if u.RawQuery != "" {
		return "", errors.New("a file:// blob URL takes no query parameters")
	}
	p := u.Path
	switch u.Host {
	case "", "localhost":
	case ".":
		// file://./rel/dir is relative to the working directory, as
		// fileblob reads it.
		p = "." + p
	default:
		return "", fmt.Errorf("a file:// URL names a local directory; host %q is not this machine (mount the share and give its path)", u.Host)
	}
	if p == "" || p == "." {
		return "", errors.New("a file:// blob URL names no directory (file:///DIR)")
	}
	return filepath.FromSlash(p), nil
}

// redact drops a URL's user info and query, which may carry secrets, for
// error messages.
func redact(u *url.URL) string {
	r := *u
	r.User = nil
	r.RawQuery = ""
	r.ForceQuery = false
	r.Fragment = ""
	return r.String()
}
