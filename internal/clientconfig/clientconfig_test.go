package clientconfig

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

func TestCompression(t *testing.T) {
	for _, c := range []struct {
		address, setting string
		want             client.GrpcCompression
	}{
		{"127.0.0.1:7233", "", &client.GrpcCompressionNone{}},
		{"[::1]:7233", "", &client.GrpcCompressionNone{}},
		{"localhost:7233", "", &client.GrpcCompressionNone{}},
		// Left to the SDK, whose default is gzip.
		{"temporal.internal:7233", "", nil},
		{"10.0.0.7:7233", "", nil},
		{"127.0.0.1:7233", "gzip", &client.GrpcCompressionGzip{}},
		{"temporal.internal:7233", "none", &client.GrpcCompressionNone{}},
	} {
		t.Run(c.address+"/"+c.setting, func(t *testing.T) {
			t.Setenv(CompressionEnv, c.setting)
			opts, err := ClientOptions(Options{DataDir: t.TempDir(), Address: c.address})
			require.NoError(t, err)
			require.Equal(t, c.want, opts.ConnectionOptions.GrpcCompression)
		})
	}
}

func TestCompressionRejectsUnknownSetting(t *testing.T) {
	t.Setenv(CompressionEnv, "zstd")
	_, err := ClientOptions(Options{DataDir: t.TempDir(), Address: "127.0.0.1:7233"})
	require.ErrorContains(t, err, `TOLLGATE_GRPC_COMPRESSION="zstd": want gzip or none`)
}
