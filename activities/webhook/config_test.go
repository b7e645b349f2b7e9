package webhook_test

import (
	"bytes"
	"encoding/base64"
	"github.com/tollgate-dev/tollgate/internal/webhooktest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/activities/webhook"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestLoadSecret(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString(secret)
	for name, content := range map[string]string{
		"whsec prefix":    "whsec_" + b64 + "\n",
		"bare base64":     b64,
		"spaces and crlf": "  whsec_" + b64 + "\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			got, err := webhook.LoadSecret(writeFile(t, "s", content))
			require.NoError(t, err)
			require.Equal(t, secret, got)
		})
	}
	for name, tc := range map[string]struct{ content, want string }{
		"not base64": {"whsec_this is not base64!", "is not base64"},
		"short":      {"whsec_" + base64.StdEncoding.EncodeToString(secret[:16]), "is 16 bytes; at least 24"},
		"empty":      {"", "is 0 bytes"},
		"huge":       {string(bytes.Repeat([]byte("A"), 5000)), "over 4096 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := webhook.LoadSecret(writeFile(t, "s", tc.content))
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "this is not", "the secret's text stays out of errors")
		})
	}
	_, err := webhook.LoadSecret(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestFromEnv(t *testing.T) {
	whsec := writeFile(t, "webhook.secret", "whsec_"+base64.StdEncoding.EncodeToString(secret)+"\n")
	linkFile := writeFile(t, "link.secret", base64.StdEncoding.EncodeToString(linkSecret))
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}

	o, err := webhook.FromEnv(env(nil))
	require.NoError(t, err)
	require.Empty(t, o.URLs, "nothing set: webhooks off")

	o, err = webhook.FromEnv(env(map[string]string{
		webhook.EnvURLs:           " https://a.example/hook , ,http://127.0.0.1:9000/x",
		webhook.EnvSecretFile:     whsec,
		webhook.EnvLinkSecretFile: linkFile,
		webhook.EnvGatewayURL:     "https://tollgate.example.com",
	}))
	require.NoError(t, err)
	require.Equal(t, []string{"https://a.example/hook", "http://127.0.0.1:9000/x"}, o.URLs)
	require.Equal(t, secret, o.Secret)
	require.NotNil(t, o.Links)
	_, err = webhook.New(o)
	require.NoError(t, err)

	// A link secret alone is the gateway's business, not an error here.
	o, err = webhook.FromEnv(env(map[string]string{webhook.EnvLinkSecretFile: linkFile}))
	require.NoError(t, err)
	require.Empty(t, o.URLs)
	require.NotNil(t, o.Links)

	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"urls without secret": {
			map[string]string{webhook.EnvURLs: "https://a.example"},
			"TOLLGATE_WEBHOOK_URLS is set but TOLLGATE_WEBHOOK_SECRET_FILE is not",
		},
		"bad url": {
			map[string]string{webhook.EnvURLs: "https://a.example,mailto:ops@example.com", webhook.EnvSecretFile: whsec},
			"TOLLGATE_WEBHOOK_URLS entry 2: mailto://: only http and https",
		},
		"short secret": {
			map[string]string{webhook.EnvURLs: "https://a.example", webhook.EnvSecretFile: writeFile(t, "short", "whsec_c2hvcnQ=")},
			"TOLLGATE_WEBHOOK_SECRET_FILE: webhook: the secret in",
		},
		"missing secret file": {
			map[string]string{webhook.EnvURLs: "https://a.example", webhook.EnvSecretFile: "/nonexistent/secret"},
			"no such file",
		},
		"short link secret": {
			map[string]string{webhook.EnvLinkSecretFile: writeFile(t, "short-link", "tooshort")},
			"TOLLGATE_LINK_SECRET_FILE: the secret in",
		},
		"links without gateway": {
			map[string]string{webhook.EnvURLs: "https://a.example", webhook.EnvSecretFile: whsec, webhook.EnvLinkSecretFile: linkFile},
			"TOLLGATE_LINK_SECRET_FILE is set but TOLLGATE_GATEWAY_URL is not",
		},
		"bad gateway": {
			map[string]string{webhook.EnvGatewayURL: "localhost:8080"},
			"TOLLGATE_GATEWAY_URL",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := webhook.FromEnv(env(tc.env))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestHeartbeatDetailsHoldNoURLs(t *testing.T) {
	// Heartbeat details reach history when an attempt fails; receiver URLs
	// (which often hold a token) must not.
	good := webhooktest.NewReceiver(t)
	bad := webhooktest.NewReceiver(t, 500)
	d := deliverer(t, webhook.Options{URLs: []string{good.URL + "/hook/SECRETPATH", bad.URL}})
	env := activityEnv(d)
	var details [][]byte
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, v converter.EncodedValues) {
		var raw any
		require.NoError(t, v.Get(&raw))
		b, _ := converter.GetDefaultDataConverter().ToPayload(raw)
		details = append(details, b.GetData())
	})
	_, err := env.ExecuteActivity(webhook.DeliverName, waitingEvent())
	require.Error(t, err)
	require.NotEmpty(t, details)
	for _, b := range details {
		require.NotContains(t, string(b), "SECRETPATH")
		require.NotContains(t, string(b), "127.0.0.1")
	}
}
