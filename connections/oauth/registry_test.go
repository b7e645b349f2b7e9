package oauth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/storage/codec"
)

// A sealed registry holds no client secret in the clear, reads back what
// it wrote, and refuses a plain record planted beside it; a registry
// without the key cannot open a sealed record.
func TestFileRegistrySealsWithTheKeyring(t *testing.T) {
	key, err := codec.NewKey("k1")
	require.NoError(t, err)
	ring, err := codec.New(key)
	require.NoError(t, err)
	dir := t.TempDir()
	sealed, err := NewFileRegistryWith(dir, FileRegistryOptions{Sealer: ring})
	require.NoError(t, err)
	reg := Registration{ID: "tracker", AuthURL: "http://127.0.0.1:1/authorize", TokenURL: "http://127.0.0.1:1/token", ClientID: "dyn", ClientSecret: "issued-secret", RedirectURL: "http://127.0.0.1:2/v1/oauth/callback"}
	require.NoError(t, sealed.Save(reg))

	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, files, 1)
	raw, err := os.ReadFile(filepath.Join(dir, files[0].Name()))
	require.NoError(t, err)
	require.NotContains(t, string(raw), "issued-secret")
	require.True(t, strings.HasPrefix(string(raw), sealedRegistration))

	got, ok, err := sealed.Load("tracker")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, reg.ClientSecret, got.ClientSecret)

	plain, err := NewFileRegistry(dir)
	require.NoError(t, err)
	_, _, err = plain.Load("tracker")
	require.ErrorContains(t, err, "encrypted")

	// A plain record written where the sealed registry reads is refused.
	require.NoError(t, plain.Save(Registration{ID: "planted", AuthURL: "http://evil.test/authorize", TokenURL: "http://evil.test/token", RedirectURL: "http://evil.test/cb"}))
	_, ok, err = sealed.Load("planted")
	require.ErrorContains(t, err, "not encrypted")
	require.False(t, ok)
}
