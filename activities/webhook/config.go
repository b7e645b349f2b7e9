package webhook

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/tollgate-dev/tollgate/internal/signedtoken"
)

// Environment variables FromEnv reads.
const (
	EnvURLs             = "TOLLGATE_WEBHOOK_URLS"
	EnvSecretFile       = "TOLLGATE_WEBHOOK_SECRET_FILE"
	EnvLinkSecretFile   = "TOLLGATE_LINK_SECRET_FILE"
	EnvGatewayURL       = "TOLLGATE_GATEWAY_URL"
	secretPrefix        = "whsec_"
	maxSecretFileLength = 4096
)

// Registry is what Register needs of a worker (worker.Worker and the
// test environments have it).
type Registry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers Deliver as DeliverName. The workflow that runs it,
// workflows.DeliveryWorkflow, is registered with the other workflows.
func (d *Deliverer) Register(r Registry) {
	r.RegisterActivityWithOptions(d.Deliver, activity.RegisterOptions{Name: DeliverName})
}

// LoadSecret reads a Standard Webhooks secret from path: "whsec_" and the
// base64 of at least MinSecretLen random bytes, as receivers' libraries
// take it (the prefix may be left out). Generate one with
// `echo "whsec_$(head -c 32 /dev/urandom | base64)" > webhook.secret`.
func LoadSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("webhook: reading the secret file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFileLength+1))
	if err != nil {
		return nil, fmt.Errorf("webhook: reading the secret file %s: %w", path, err)
	}
	if len(data) > maxSecretFileLength {
		return nil, fmt.Errorf("webhook: the secret file %s is over %d bytes; it should hold one secret", path, maxSecretFileLength)
	}
	text := strings.TrimPrefix(string(bytes.TrimSpace(data)), secretPrefix)
	key, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		// The decoder's message quotes a byte of the secret.
		return nil, fmt.Errorf("webhook: the secret in %s is not base64 (expected whsec_ followed by base64, as receivers configure it)", path)
	}
	if len(key) < MinSecretLen {
		return nil, fmt.Errorf("webhook: the secret in %s is %d bytes; at least %d are needed", path, len(key), MinSecretLen)
	}
	return key, nil
}

// FromEnv reads the webhook configuration from the environment through
// getenv (os.Getenv):
//
//   - TOLLGATE_WEBHOOK_URLS: receivers, comma-separated; empty turns
//     webhooks off (Options.URLs is empty, and New would refuse it).
//   - TOLLGATE_WEBHOOK_SECRET_FILE: the signing secret (see LoadSecret);
//     required with URLs, since unsigned events cannot be trusted.
//   - TOLLGATE_LINK_SECRET_FILE: the link secret (see
//     signedtoken.LoadSecret); when set, call.waiting events carry links.
//   - TOLLGATE_GATEWAY_URL: the gateway's public base URL; required with
//     both URLs and a link secret.
func FromEnv(getenv func(string) string) (Options, error) {
	var o Options
	for _, raw := range strings.Split(getenv(EnvURLs), ",") {
		if raw = strings.TrimSpace(raw); raw != "" {
			o.URLs = append(o.URLs, raw)
		}
	}
	for i, raw := range o.URLs {
		if _, err := parseReceiver(raw); err != nil {
			return Options{}, fmt.Errorf("webhook: %s entry %d: %w", EnvURLs, i+1, err)
		}
	}
	if path := getenv(EnvLinkSecretFile); path != "" {
		key, err := signedtoken.LoadSecret(path)
		if err != nil {
			return Options{}, fmt.Errorf("%s: %w", EnvLinkSecretFile, err)
		}
		if o.Links, err = signedtoken.NewSigner(key); err != nil {
			return Options{}, fmt.Errorf("%s: %w", EnvLinkSecretFile, err)
		}
	}
	o.GatewayURL = getenv(EnvGatewayURL)
	if o.GatewayURL != "" {
		if _, err := parseGateway(o.GatewayURL); err != nil {
			return Options{}, fmt.Errorf("webhook: %s: %w", EnvGatewayURL, err)
		}
	}
	if len(o.URLs) == 0 {
		return o, nil
	}
	path := getenv(EnvSecretFile)
	if path == "" {
		return Options{}, fmt.Errorf("webhook: %s is set but %s is not: events must be signed so receivers can trust them", EnvURLs, EnvSecretFile)
	}
	var err error
	if o.Secret, err = LoadSecret(path); err != nil {
		return Options{}, fmt.Errorf("%s: %w", EnvSecretFile, err)
	}
	if o.Links != nil && o.GatewayURL == "" {
		return Options{}, errors.New("webhook: " + EnvLinkSecretFile + " is set but " + EnvGatewayURL + " is not: the links in events need the gateway's public URL")
	}
	return o, nil
}
