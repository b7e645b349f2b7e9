package clientconfig

import (
	"fmt"
	"os"

	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/storage/codec"
	"github.com/tollgate-dev/tollgate/storage/datadir"
)

// DataConverter is what every Tollgate process encodes payloads with:
// Temporal's default, encrypted with the keys TOLLGATE_CODEC_KEYS_FILE
// names. Nil, the SDK's default, when that is unset.
func DataConverter() (converter.DataConverter, error) {
	keys, err := codec.FromEnv(os.Getenv)
	if err != nil || keys == nil {
		return nil, err
	}
	return keys.DataConverter(), nil
}

// Connections opens the connection store of dataDir as every Tollgate
// process must, so that they read each other's tokens: sealed with the
// keys TOLLGATE_CODEC_KEYS_FILE names (getenv reads it), plain when that
// is unset.
func Connections(dataDir string, getenv func(string) string) (*connections.FileStore, error) {
	keys, err := codec.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	var opts connections.FileStoreOptions
	if keys != nil {
		opts.Sealer = keys
	}
	store, err := connections.NewFileStoreWith(datadir.Connections(dataDir), opts)
	if err != nil {
		return nil, fmt.Errorf("open the connection store in %s: %w", dataDir, err)
	}
	return store, nil
}

// OAuthRegistry opens the registry of the providers discovered for MCP
// servers in dataDir, as the workers (which discover them) and the
// gateway (which sends people to them) must share it: sealed like the
// connection store.
func OAuthRegistry(dataDir string, getenv func(string) string) (*oauth.FileRegistry, error) {
	keys, err := codec.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	var opts oauth.FileRegistryOptions
	if keys != nil {
		opts.Sealer = keys
	}
	reg, err := oauth.NewFileRegistryWith(datadir.OAuthRegistry(dataDir), opts)
	if err != nil {
		return nil, fmt.Errorf("open the OAuth registry in %s: %w", dataDir, err)
	}
	return reg, nil
}
