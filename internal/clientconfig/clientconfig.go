// Package clientconfig builds the Temporal client options the worker, the
// starter and the replayer share: Temporal's own envconfig convention
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS settings and
// temporal.toml profiles) plus Tollgate's external payload storage in the
// data directory. Client, worker and replayer must agree on the storage,
// or a large payload written by one cannot be read by another.
package clientconfig

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/metrics"
)

// Options select the profile and override what flags set.
type Options struct {
	DataDir string
	// Profile is a temporal.toml profile name; empty means TEMPORAL_PROFILE
	// or "default".
	Profile string
	// Address and Namespace, when set, win over the environment and file.
	Address   string
	Namespace string
	Logger    *slog.Logger
	// MetricsHandler receives the SDK's metrics and Tollgate's (see
	// package metrics); nil records none.
	MetricsHandler client.MetricsHandler
}

// ClientOptions loads the options for a Temporal client.
func ClientOptions(o Options) (client.Options, error) {
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{ConfigFileProfile: o.Profile})
	if err != nil {
		return client.Options{}, fmt.Errorf("load Temporal client configuration: %w", err)
	}
	if o.Address != "" {
		opts.HostPort = o.Address
	}
	if o.Namespace != "" {
		opts.Namespace = o.Namespace
	}
	if opts.HostPort == "" {
		opts.HostPort = client.DefaultHostPort
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	if opts.ConnectionOptions.GrpcCompression, err = compression(os.Getenv(CompressionEnv), opts.HostPort); err != nil {
		return client.Options{}, err
	}
	ext, err := ExternalStorage(o.DataDir)
	if err != nil {
		return client.Options{}, err
	}
	opts.ExternalStorage = metrics.CountStorage(ext, o.MetricsHandler)
	// Encrypted with the keys TOLLGATE_CODEC_KEYS_FILE names, if set.
	if opts.DataConverter, err = DataConverter(); err != nil {
		return client.Options{}, err
	}
	if o.MetricsHandler != nil {
		opts.MetricsHandler = o.MetricsHandler
	}
	// Traced when the process started tracing (telemetry.StartTracing).
	opts.Interceptors = append(opts.Interceptors, telemetry.ClientInterceptors()...)
	if o.Logger != nil {
		opts.Logger = log.NewStructuredLogger(o.Logger)
	}
	return opts, nil
}

// CompressionEnv overrides how requests to the Temporal server are
// compressed: "gzip" or "none". Unset, a server on a loopback address
// gets none and any other the SDK's gzip.
const CompressionEnv = "TOLLGATE_GRPC_COMPRESSION"

// compression is the gRPC compression for a server at hostPort. Over
// loopback gzip saves no bandwidth and costs CPU on both ends, the
// server's included when it runs in the same process (worker --dev):
// there a turn's tool call measured about 5% faster without it.
func compression(setting, hostPort string) (client.GrpcCompression, error) {
	switch setting {
	case "gzip":
		return &client.GrpcCompressionGzip{}, nil
	case "none":
		return &client.GrpcCompressionNone{}, nil
	case "":
		if loopback(hostPort) {
			return &client.GrpcCompressionNone{}, nil
		}
		return nil, nil
	}
	return nil, fmt.Errorf("%s=%q: want gzip or none", CompressionEnv, setting)
}

func loopback(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ExternalStorage is the payload storage the tollgate plugin gives
// clients of dataDir (empty means TOLLGATE_DATA or the default).
func ExternalStorage(dataDir string) (converter.ExternalStorage, error) {
	p, err := tollgate.NewClientPlugin(dataDir)
	if err != nil {
		return converter.ExternalStorage{}, err
	}
	return p.ExternalStorage(), nil
}

// Dial connects a client.
func Dial(ctx context.Context, o Options) (client.Client, error) {
	opts, err := ClientOptions(o)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w", opts.HostPort, opts.Namespace, err)
	}
	return c, nil
}
