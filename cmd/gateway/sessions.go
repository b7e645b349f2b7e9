package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/storage/blobstore"
)

// sessionPrefix is where inbox sessions live in a shared bucket, apart
// from the content-addressed payloads and transcripts.
const sessionPrefix = "gateway/sessions/"

// openSessions opens the store of signed-in inbox sessions: the bucket
// TOLLGATE_BLOB_URL names (the one every worker and gateway shares, so
// replicas share sessions: a sign-out on one ends the session on all),
// else a directory in the data directory.
func openSessions(ctx context.Context, dataDir string, ttl time.Duration, getenv func(string) string) (*gateway.BucketSessions, func(), error) {
	var b *blob.Bucket
	if u := blobstore.URLFromEnv(getenv); u != "" {
		bucket, err := blob.OpenBucket(ctx, u)
		if err != nil {
			return nil, nil, fmt.Errorf("open %s for inbox sessions: %w", blobstore.EnvVar, err)
		}
		b = blob.PrefixedBucket(bucket, sessionPrefix)
	} else {
		dir := filepath.Join(dataDir, filepath.FromSlash(sessionPrefix))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("create the inbox sessions directory: %w", err)
		}
		bucket, err := fileblob.OpenBucket(dir, &fileblob.Options{NoTempDir: true, DirFileMode: 0o700, Metadata: fileblob.MetadataDontWrite})
		if err != nil {
			return nil, nil, fmt.Errorf("open the inbox sessions directory %s: %w", dir, err)
		}
		b = bucket
	}
	return gateway.NewBucketSessions(b, ttl), func() { _ = b.Close() }, nil
}
