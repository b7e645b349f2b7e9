package connections

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const secret = "ghp_SECRETSECRETSECRET"

func stores(t *testing.T) map[string]Store {
	fs, err := NewFileStore(filepath.Join(t.TempDir(), "connections"))
	require.NoError(t, err)
	return map[string]Store{"file": fs, "memory": NewMemoryStore()}
}

func TestStoreContract(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			_, err := s.Get(ctx, "alice", "github")
			require.ErrorIs(t, err, ErrNotConnected)
			require.ErrorContains(t, err, "alice")
			require.ErrorContains(t, err, "github")

			created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
			want := Credential{Provider: "github", User: "alice", Token: secret, Scopes: []string{"repo"}, CreatedAt: created}
			require.NoError(t, s.Put(ctx, want))
			got, err := s.Get(ctx, "alice", "github")
			require.NoError(t, err)
			require.Equal(t, want, got)

			// Other users and providers stay unconnected.
			_, err = s.Get(ctx, "bob", "github")
			require.ErrorIs(t, err, ErrNotConnected)
			_, err = s.Get(ctx, "alice", "jira")
			require.ErrorIs(t, err, ErrNotConnected)

			// Put replaces.
			want.Token = secret + "2"
			require.NoError(t, s.Put(ctx, want))
			got, err = s.Get(ctx, "alice", "github")
			require.NoError(t, err)
			require.Equal(t, secret+"2", got.Token)

			require.NoError(t, s.Delete(ctx, "alice", "github"))
			_, err = s.Get(ctx, "alice", "github")
			require.ErrorIs(t, err, ErrNotConnected)
			require.NoError(t, s.Delete(ctx, "alice", "github"), "deleting twice is fine")
		})
	}
}

func TestPutFillsCreatedAt(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, s.Put(ctx, Credential{Provider: "github", User: "u", Token: "t"}))
			got, err := s.Get(ctx, "u", "github")
			require.NoError(t, err)
			require.WithinDuration(t, time.Now(), got.CreatedAt, time.Minute)
		})
	}
}

func TestUnsafeNamesRejected(t *testing.T) {
	ctx := context.Background()
	bad := []string{"", "..", "../x", "a/b", `a\b`, "a..b", ".hidden", "nul\x00", strings.Repeat("x", 201)}
	for name, s := range stores(t) {
		for _, n := range bad {
			t.Run(fmt.Sprintf("%s/%q", name, n), func(t *testing.T) {
				_, err := s.Get(ctx, n, "github")
				require.Error(t, err)
				require.NotErrorIs(t, err, ErrNotConnected)
				_, err = s.Get(ctx, "alice", n)
				require.Error(t, err)
				require.Error(t, s.Put(ctx, Credential{Provider: "github", User: n, Token: "t"}))
				require.Error(t, s.Put(ctx, Credential{Provider: n, User: "alice", Token: "t"}))
				require.Error(t, s.Delete(ctx, n, "github"))
			})
		}
	}
	require.NoError(t, ValidName("alice@example.com"))
	require.NoError(t, ValidName("github"))
}

func TestPutRejectsEmptyToken(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			require.ErrorContains(t, s.Put(context.Background(), Credential{Provider: "github", User: "u"}), "empty token")
		})
	}
}

func TestFileStorePermissionsAndLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "connections")
	s, err := NewFileStore(dir)
	require.NoError(t, err)
	require.NoError(t, s.Put(context.Background(), Credential{Provider: "github", User: "alice", Token: secret}))

	for path, want := range map[string]os.FileMode{
		dir:                         0o700,
		filepath.Join(dir, "alice"): 0o700,
		filepath.Join(dir, "alice", "github.json"): 0o600,
	} {
		info, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, want, info.Mode().Perm(), path)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "alice"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temp files left behind")

	// A second store on the same directory (another worker) sees it.
	s2, err := NewFileStore(dir)
	require.NoError(t, err)
	got, err := s2.Get(context.Background(), "alice", "github")
	require.NoError(t, err)
	require.Equal(t, secret, got.Token)
}

// TestFileStoreTightensExistingDirectory: a store directory made by hand,
// by an older version or under a loose umask must not stay readable by
// others once a worker opens it.
func TestFileStoreTightensExistingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "connections")
	loose := func(path string, perm os.FileMode) {
		// Chmod, not the create call, so the umask cannot hide the test.
		require.NoError(t, os.Chmod(path, perm))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "alice"), 0o777))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bob"), 0o777))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alice", "github.json"), []byte(`{"provider":"github","user":"alice","token":"`+secret+`"}`), 0o644))
	loose(dir, 0o777)
	loose(filepath.Join(dir, "alice"), 0o777)
	loose(filepath.Join(dir, "bob"), 0o755)
	loose(filepath.Join(dir, "alice", "github.json"), 0o644)
	outside := filepath.Join(t.TempDir(), "outside.json")
	require.NoError(t, os.WriteFile(outside, []byte("not the store's"), 0o644))
	loose(outside, 0o644)
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "bob", "link.json")))

	s, err := NewFileStore(dir)
	require.NoError(t, err)
	for path, want := range map[string]os.FileMode{
		dir:                         0o700,
		filepath.Join(dir, "alice"): 0o700,
		filepath.Join(dir, "bob"):   0o700,
		filepath.Join(dir, "alice", "github.json"): 0o600,
		outside: 0o644, // a link in the store does not reach out of it
	} {
		info, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, want, info.Mode().Perm(), path)
	}
	got, err := s.Get(context.Background(), "alice", "github")
	require.NoError(t, err)
	require.Equal(t, secret, got.Token)

	// A user directory loosened (or created by hand) after the store
	// opened is tightened when a token is written into it.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "carol"), 0o777))
	loose(filepath.Join(dir, "carol"), 0o777)
	require.NoError(t, s.Put(context.Background(), Credential{Provider: "github", User: "carol", Token: secret}))
	for path, want := range map[string]os.FileMode{
		filepath.Join(dir, "carol"):                0o700,
		filepath.Join(dir, "carol", "github.json"): 0o600,
	} {
		info, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, want, info.Mode().Perm(), path)
	}
}

func TestFileStoreCorruptFileHidesContent(t *testing.T) {
	dir := t.TempDir()
	s, err := NewFileStore(dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "alice"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alice", "github.json"), []byte(`{"token": "`+secret), 0o600))
	_, err = s.Get(context.Background(), "alice", "github")
	require.ErrorContains(t, err, "not a valid credential file")
	require.NotContains(t, err.Error(), secret)

	// A file copied under the wrong name is refused, not served to another user.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alice", "jira.json"), []byte(`{"provider":"github","user":"bob","token":"t"}`), 0o600))
	_, err = s.Get(context.Background(), "alice", "jira")
	require.ErrorContains(t, err, "holds bob/github")
}

func TestCredentialPrintsWithoutToken(t *testing.T) {
	c := Credential{Provider: "github", User: "alice", Token: secret, Scopes: []string{"repo"}}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(f, c)
		require.NotContains(t, out, secret, f)
		require.Contains(t, out, "alice", f)
	}
}

func TestFileStoreConcurrentPuts(t *testing.T) {
	s, err := NewFileStore(t.TempDir())
	require.NoError(t, err)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			require.NoError(t, s.Put(ctx, Credential{Provider: "github", User: "alice", Token: fmt.Sprintf("token-%d", i)}))
		})
	}
	wg.Wait()
	got, err := s.Get(ctx, "alice", "github")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(got.Token, "token-"))
}

func TestCancelledContext(t *testing.T) {
	s, err := NewFileStore(t.TempDir())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Get(ctx, "alice", "github")
	require.ErrorIs(t, err, context.Canceled)
}
