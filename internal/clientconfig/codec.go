package clientconfig

import (
	"os"

	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/storage/codec"
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
