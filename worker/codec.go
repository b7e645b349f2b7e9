package main

import (
	"log/slog"
	"os"

	"github.com/tollgate-dev/tollgate/internal/devserver"
	"github.com/tollgate-dev/tollgate/storage/codec"
)

// startDevCodec starts the codec server for worker --dev's embedded Web
// UI with the keys TOLLGATE_CODEC_KEYS_FILE names; nil when encryption is
// off (its Endpoint is then empty and Stop a no-op).
func startDevCodec(uiPort int, logger *slog.Logger) (*devserver.Codec, error) {
	keys, err := codec.FromEnv(os.Getenv)
	if err != nil || keys == nil {
		return nil, err
	}
	return devserver.StartCodec(devserver.CodecOptions{Keys: keys, UIPort: uiPort, Logger: logger})
}
