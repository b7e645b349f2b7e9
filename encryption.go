package tollgate

import (
	"fmt"
	"os"

	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/storage/codec"
)

// keysFor is the keyring opts name: Codec, else the keys file
// TOLLGATE_CODEC_KEYS_FILE names, else nil (encryption off).
func keysFor(keys *codec.Keyring) (*codec.Keyring, error) {
	if keys != nil {
		return keys, nil
	}
	keys, err := codec.FromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("tollgate: %w", err)
	}
	return keys, nil
}

// connectionSealer is what the connection store seals tokens with; a nil
// interface, not a nil keyring, when encryption is off.
func connectionSealer(keys *codec.Keyring) connections.Sealer {
	if keys == nil {
		return nil
	}
	return keys
}

// Codec is the keyring payloads and stores are encrypted with; nil when
// encryption is off.
func (p *Plugin) Codec() *codec.Keyring { return p.codec }

// DataConverter is the data converter the plugin sets on clients and
// replayers (the default one, encrypting), for code that builds their
// options by hand; nil when encryption is off.
func (p *Plugin) DataConverter() converter.DataConverter {
	if p.codec == nil {
		return nil
	}
	return p.withCodec(nil)
}

// withCodec wraps dc (nil: the default) in the payload codec. The SDK
// runs the codec before external storage, so the payload store receives
// ciphertext.
func (p *Plugin) withCodec(dc converter.DataConverter) converter.DataConverter {
	if p.codec == nil {
		return dc
	}
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	return converter.NewCodecDataConverter(dc, p.codec)
}
