package workflows_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/replay"
	"github.com/tollgate-dev/tollgate/storage/codec"
)

// encryptedCorpus holds histories recorded with payload encryption on
// (`go test ./internal/tests/e2e/ -run Encryption -record`), and test-keys, the
// public test-only keys they were encrypted with: the current key first,
// then the one it rotated from.
const encryptedCorpus = "testdata/histories/encrypted"

func encryptedCorpusKeys(t *testing.T) []codec.Key {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(encryptedCorpus, "test-keys"))
	require.NoError(t, err)
	keys, err := codec.ParseKeys(b)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	return keys
}

// An encrypted history replays with its keys, and without them fails
// before replaying, naming the key it needs.
func TestEncryptedCorpusReplays(t *testing.T) {
	t.Setenv(codec.EnvKeysFile, "") // only what each case gives
	files, err := filepath.Glob(filepath.Join(encryptedCorpus, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "the encrypted corpus is missing; record it with go test ./internal/tests/e2e/ -run Encryption -record")
	keys := encryptedCorpusKeys(t)
	current, original := keys[0], keys[1]

	both, err := codec.New(current, original)
	require.NoError(t, err)
	for _, r := range replay.Files(context.Background(), []string{encryptedCorpus}, replay.Options{DataDir: t.TempDir(), Codec: both}) {
		assert.NoError(t, r.Err, "%s no longer replays", r.Path)
		assert.Positive(t, r.Events, r.Path)
	}

	for _, r := range replay.Files(context.Background(), []string{encryptedCorpus}, replay.Options{DataDir: t.TempDir()}) {
		require.Error(t, r.Err, "%s replayed without its keys", r.Path)
		assert.ErrorContains(t, r.Err, "the history's payloads are encrypted (key \""+original.ID+"\")", r.Path)
		assert.ErrorContains(t, r.Err, codec.EnvKeysFile, r.Path)
	}

	// The rotated key alone cannot read what the original key encrypted.
	rotatedOnly, err := codec.New(current)
	require.NoError(t, err)
	for _, r := range replay.Files(context.Background(), []string{encryptedCorpus}, replay.Options{DataDir: t.TempDir(), Codec: rotatedOnly}) {
		assert.ErrorIs(t, r.Err, codec.ErrUnknownKey, r.Path)
		assert.ErrorContains(t, r.Err, "payload encrypted with key \""+original.ID+"\", which this process does not have", r.Path)
	}

	// The keys file route, as starter replay takes it.
	t.Setenv(codec.EnvKeysFile, filepath.Join(encryptedCorpus, "test-keys"))
	for _, r := range replay.Files(context.Background(), []string{encryptedCorpus}, replay.Options{DataDir: t.TempDir()}) {
		assert.NoError(t, r.Err, "%s does not replay with %s set", r.Path, codec.EnvKeysFile)
	}
}
