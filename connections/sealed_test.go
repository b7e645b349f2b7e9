package connections

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/storage/codec"
)

// Sealed with the payload codec's keyring: the file holds no token, a
// store without the key cannot read it, and files written before
// encryption was turned on are refused until they are sealed.
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

	_, err = sealed.Get(ctx, "alice", "jira")
	require.ErrorIs(t, err, ErrUnsealed, "a file from before encryption waits for the migration")

	other, err := codec.NewKey("k2")
	require.NoError(t, err)
	otherRing, err := codec.New(other)
	require.NoError(t, err)
	wrong, err := NewFileStoreWith(dir, FileStoreOptions{Sealer: otherRing})
	require.NoError(t, err)
	_, err = wrong.Get(ctx, "alice", "github")
	require.ErrorContains(t, err, "could not be decrypted")
}

func sealedStore(t *testing.T, dir string) *FileStore {
	t.Helper()
	key, err := codec.NewKey("k1")
	require.NoError(t, err)
	ring, err := codec.New(key)
	require.NoError(t, err)
	s, err := NewFileStoreWith(dir, FileStoreOptions{Sealer: ring})
	require.NoError(t, err)
	return s
}

// plant writes a plain credential file by hand, as someone with write
// access to the data directory (or an older, unsealed Tollgate) would.
func plant(t *testing.T, dir, user, provider, token string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, user), 0o700))
	path := filepath.Join(dir, user, provider+".json")
	b, err := json.Marshal(Credential{User: user, Provider: provider, Token: token})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// Once sealing is on, a plain file is not served as the user's token: it
// could have been planted by anyone who can write the data directory. The
// error tells the operator how to seal files that are really theirs.
func TestSealedStoreRefusesPlainFiles(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	plant(t, dir, "alice", "github", secret+"-planted")
	s := sealedStore(t, dir)

	_, err := s.Get(ctx, "alice", "github")
	require.ErrorIs(t, err, ErrUnsealed)
	require.NotErrorIs(t, err, ErrNotConnected, "a planted file must not look like a missing connection either")
	require.ErrorContains(t, err, "alice/github")
	require.ErrorContains(t, err, "starter connections migrate")
	require.NotContains(t, err.Error(), secret)

	// Putting a real token replaces the planted file with a sealed one.
	require.NoError(t, s.Put(ctx, Credential{User: "alice", Provider: "github", Token: secret}))
	got, err := s.Get(ctx, "alice", "github")
	require.NoError(t, err)
	require.Equal(t, secret, got.Token)

	// A store without sealing still reads plain files, as before.
	plain, err := NewFileStore(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, plain.Put(ctx, Credential{User: "bob", Provider: "jira", Token: secret}))
	got, err = plain.Get(ctx, "bob", "jira")
	require.NoError(t, err)
	require.Equal(t, secret, got.Token)
}

// The migration seals every plain credential file in place, leaves sealed
// ones alone, and refuses to seal what is not a credential of its path.
func TestSealPlainFilesMigratesInPlace(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	a := plant(t, dir, "alice", "github", secret+"-a")
	plant(t, dir, "bob", "jira", secret+"-b")
	// A file naming another user than its path is not sealed: sealing
	// would turn it into a token the store then serves.
	bad := plant(t, dir, "carol", "github", secret+"-c")
	b, err := json.Marshal(Credential{User: "alice", Provider: "github", Token: secret + "-c"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bad, b, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "carol", "notes.txt"), []byte("not a credential"), 0o600))

	s := sealedStore(t, dir)
	require.NoError(t, s.Put(ctx, Credential{User: "dave", Provider: "github", Token: secret + "-d"}))
	before, err := os.ReadFile(filepath.Join(dir, "dave", "github.json"))
	require.NoError(t, err)

	sealed, err := s.SealPlainFiles(ctx)
	require.ErrorContains(t, err, "carol/github")
	require.NotContains(t, err.Error(), secret)
	require.ElementsMatch(t, []string{"alice/github", "bob/jira"}, sealed)

	for user, provider := range map[string]string{"alice": "github", "bob": "jira"} {
		raw, err := os.ReadFile(filepath.Join(dir, user, provider+".json"))
		require.NoError(t, err)
		require.NotContains(t, string(raw), secret, "%s/%s is sealed", user, provider)
		got, err := s.Get(ctx, user, provider)
		require.NoError(t, err)
		require.Equal(t, secret+"-"+user[:1], got.Token)
	}
	info, err := os.Stat(a)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	after, err := os.ReadFile(filepath.Join(dir, "dave", "github.json"))
	require.NoError(t, err)
	require.Equal(t, before, after, "a sealed file is not rewritten")
	_, err = s.Get(ctx, "carol", "github")
	require.ErrorIs(t, err, ErrUnsealed, "the refused file stays refused")

	// No temporary files are left behind.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		require.False(t, strings.HasPrefix(d.Name(), "."), "left %s behind", p)
		return nil
	})
	require.NoError(t, err)

	// A second run finds nothing left to seal but the refused file.
	sealed, err = s.SealPlainFiles(ctx)
	require.ErrorContains(t, err, "carol/github")
	require.Empty(t, sealed)

	plain, err := NewFileStore(dir)
	require.NoError(t, err)
	_, err = plain.SealPlainFiles(ctx)
	require.ErrorContains(t, err, "no key")
}
