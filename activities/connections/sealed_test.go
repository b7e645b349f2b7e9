package connections

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/storage/codec"
)

// Sealed with the payload codec's keyring: the file holds no token, a
// store without the key cannot read it, and files written before
// encryption was turned on are still read.
func TestFileStoreSealsWithTheKeyring(t *testing.T) {
	key, err := codec.NewKey("k1")
	require.NoError(t, err)
	ring, err := codec.New(key)
	require.NoError(t, err)
	dir := t.TempDir()
	plain, err := NewFileStore(dir)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, plain.Put(ctx, Credential{Provider: "jira", User: "alice", Token: secret + "-old"}))

	sealed, err := NewFileStoreWith(dir, FileStoreOptions{Sealer: ring})
	require.NoError(t, err)
	want := Credential{Provider: "github", User: "alice", Token: secret, RefreshToken: secret + "-refresh"}
	require.NoError(t, sealed.Put(ctx, want))
	raw, err := os.ReadFile(filepath.Join(dir, "alice", "github.json"))
	require.NoError(t, err)
	require.NotContains(t, string(raw), secret)
	got, err := sealed.Get(ctx, "alice", "github")
	require.NoError(t, err)
	require.Equal(t, want.Token, got.Token)
	require.Equal(t, want.RefreshToken, got.RefreshToken)

	_, err = plain.Get(ctx, "alice", "github")
	require.ErrorContains(t, err, "encrypted")
	require.NotContains(t, err.Error(), secret)

	old, err := sealed.Get(ctx, "alice", "jira")
	require.NoError(t, err, "a file from before encryption is read")
	require.Equal(t, secret+"-old", old.Token)

	other, err := codec.NewKey("k2")
	require.NoError(t, err)
	otherRing, err := codec.New(other)
	require.NoError(t, err)
	wrong, err := NewFileStoreWith(dir, FileStoreOptions{Sealer: otherRing})
	require.NoError(t, err)
	_, err = wrong.Get(ctx, "alice", "github")
	require.ErrorContains(t, err, "could not be decrypted")
}
