package codecserver_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tollgate-dev/tollgate/storage/codec"
	"github.com/tollgate-dev/tollgate/storage/codec/codecserver"
)

const (
	token    = "s3cret-token"
	uiOrigin = "http://localhost:8233"
)

type fixture struct {
	keys *codec.Keyring
	url  string
}

func serve(t *testing.T, mutate func(*codecserver.Options)) fixture {
	t.Helper()
	key, err := codec.NewKey("test")
	require.NoError(t, err)
	keys, err := codec.New(key)
	require.NoError(t, err)
	opts := codecserver.Options{Codec: keys, Tokens: []string{token}, UIOrigins: []string{uiOrigin}, MaxBody: 64 << 10}
	if mutate != nil {
		mutate(&opts)
	}
	h, err := codecserver.New(opts)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return fixture{keys: keys, url: srv.URL}
}

func body(t *testing.T, payloads ...*commonpb.Payload) []byte {
	t.Helper()
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: payloads})
	require.NoError(t, err)
	return b
}

func post(t *testing.T, url string, b []byte, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, out
}

var authed = map[string]string{"Authorization": "Bearer " + token, "X-Namespace": "default"}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	f := serve(t, nil)
	plain, err := converter.GetDefaultDataConverter().ToPayload("marker-http-42")
	require.NoError(t, err)

	resp, out := post(t, f.url+"/encode", body(t, plain), authed)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.NotContains(t, string(out), "marker-http-42")
	var enc commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(out, &enc))
	require.Equal(t, codec.EncodingEncrypted, string(enc.Payloads[0].Metadata[codec.MetadataEncoding]))

	// What the server encoded, the keyring decodes, and the other way.
	dec, err := f.keys.Decode(enc.Payloads)
	require.NoError(t, err)
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[0], &s))
	require.Equal(t, "marker-http-42", s)

	sealed, err := f.keys.Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	// The UI prefixes the endpoint's own path; only the suffix matters.
	resp, out = post(t, f.url+"/some/prefix/decode", body(t, sealed...), authed)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	var got commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(out, &got))
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(got.Payloads[0], &s))
	require.Equal(t, "marker-http-42", s)
	// The JSON is the shape the UI reads: payloads, metadata, data.
	require.Contains(t, string(out), `"payloads"`)
	require.Contains(t, string(out), `"metadata"`)
}

func TestCORSPreflight(t *testing.T) {
	f := serve(t, nil)
	req, err := http.NewRequest(http.MethodOptions, f.url+"/decode", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", uiOrigin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type,x-namespace")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "a preflight needs no token")
	require.Equal(t, uiOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))
	allowed := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
	for _, h := range []string{"authorization", "x-namespace", "content-type"} {
		require.Contains(t, allowed, h)
	}
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), "POST")

	// The real request from the UI carries the same origin back.
	plain, err := converter.GetDefaultDataConverter().ToPayload("x")
	require.NoError(t, err)
	resp2, out := post(t, f.url+"/encode", body(t, plain), map[string]string{"Authorization": "Bearer " + token, "Origin": uiOrigin})
	require.Equal(t, http.StatusOK, resp2.StatusCode, string(out))
	require.Equal(t, uiOrigin, resp2.Header.Get("Access-Control-Allow-Origin"))
}

func TestRefusals(t *testing.T) {
	f := serve(t, nil)
	plain, err := converter.GetDefaultDataConverter().ToPayload("x")
	require.NoError(t, err)
	good := body(t, plain)

	for name, tc := range map[string]struct {
		path    string
		body    []byte
		headers map[string]string
		status  int
	}{
		"no token":         {"/decode", good, map[string]string{}, http.StatusUnauthorized},
		"wrong token":      {"/decode", good, map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized},
		"basic auth":       {"/decode", good, map[string]string{"Authorization": "Basic " + token}, http.StatusUnauthorized},
		"foreign origin":   {"/decode", good, map[string]string{"Authorization": "Bearer " + token, "Origin": "https://evil.example"}, http.StatusForbidden},
		"bad json":         {"/decode", []byte(`{"payloads": [`), authed, http.StatusBadRequest},
		"not payloads":     {"/decode", []byte(`{"nope": 1}`), authed, http.StatusBadRequest},
		"too large":        {"/encode", bytes.Repeat([]byte(" "), 65<<10), authed, http.StatusRequestEntityTooLarge},
		"unknown endpoint": {"/other", good, authed, http.StatusNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			resp, out := post(t, f.url+tc.path, tc.body, tc.headers)
			require.Equal(t, tc.status, resp.StatusCode, string(out))
			if tc.status == http.StatusUnauthorized {
				require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
			}
			if tc.status == http.StatusForbidden {
				require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
			}
		})
	}

	// A foreign page's preflight is refused too.
	req, err := http.NewRequest(http.MethodOptions, f.url+"/decode", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// A payload sealed with a key the server lacks is a clear 400.
	other, err := codec.NewKey("elsewhere")
	require.NoError(t, err)
	otherRing, err := codec.New(other)
	require.NoError(t, err)
	sealed, err := otherRing.Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	r, out := post(t, f.url+"/decode", body(t, sealed...), authed)
	require.Equal(t, http.StatusBadRequest, r.StatusCode)
	require.Contains(t, string(out), `key "elsewhere", which this process does not have`)
}

func TestNamespacesAndUnauthenticated(t *testing.T) {
	f := serve(t, func(o *codecserver.Options) {
		o.Tokens = nil
		o.Unauthenticated = true
		o.Namespaces = []string{"default"}
	})
	plain, err := converter.GetDefaultDataConverter().ToPayload("x")
	require.NoError(t, err)
	resp, out := post(t, f.url+"/encode", body(t, plain), map[string]string{"Origin": uiOrigin, "X-Namespace": "default"})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	resp, _ = post(t, f.url+"/encode", body(t, plain), map[string]string{"X-Namespace": "prod"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	// Without tokens, a presented token is still checked, not waved through.
	resp, _ = post(t, f.url+"/encode", body(t, plain), map[string]string{"Authorization": "Bearer guess"})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	// Unauthenticated never means any origin.
	resp, _ = post(t, f.url+"/encode", body(t, plain), map[string]string{"Origin": "http://localhost:9999"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

func TestOptionsAndTokens(t *testing.T) {
	keys, err := codec.New(codec.Key{ID: "k", Secret: make([]byte, 32)})
	require.NoError(t, err)
	_, err = codecserver.New(codecserver.Options{Codec: keys})
	require.ErrorContains(t, err, "no bearer tokens")
	_, err = codecserver.New(codecserver.Options{Codec: keys, Tokens: []string{"t"}, UIOrigins: []string{"*"}})
	require.ErrorContains(t, err, "any web page")
	_, err = codecserver.New(codecserver.Options{Codec: keys, Tokens: []string{"t"}, UIOrigins: []string{"http://localhost:8233/"}})
	require.ErrorContains(t, err, "ends with '/'")

	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte("# ops\none\n\n two \n"), 0o600))
	tokens, err := codecserver.LoadTokens(path)
	require.NoError(t, err)
	require.Equal(t, []string{"one", "two"}, tokens)
	require.NoError(t, os.WriteFile(path, []byte("# none\n"), 0o600))
	_, err = codecserver.LoadTokens(path)
	require.ErrorContains(t, err, "holds no tokens")
}

// With namespaces configured, a request that names none is refused: the
// allowlist would otherwise be skipped by leaving the header out.
func TestNamespacesRequireHeader(t *testing.T) {
	f := serve(t, func(o *codecserver.Options) { o.Namespaces = []string{"prod"} })
	plain, err := converter.GetDefaultDataConverter().ToPayload("marker-ns-7")
	require.NoError(t, err)
	sealed, err := f.keys.Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	bearer := "Bearer " + token

	for _, path := range []string{"/decode", "/encode"} {
		resp, out := post(t, f.url+path, body(t, sealed...), map[string]string{"Authorization": bearer})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(out))
		require.Contains(t, string(out), "X-Namespace")
		require.NotContains(t, string(out), "marker-ns-7")
	}
	resp, out := post(t, f.url+"/decode", body(t, sealed...), map[string]string{"Authorization": bearer, "X-Namespace": "dev"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, string(out))
	require.Contains(t, string(out), `"dev"`)
	resp, out = post(t, f.url+"/decode", body(t, sealed...), map[string]string{"Authorization": bearer, "X-Namespace": "prod"})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	require.Contains(t, string(out), `"payloads"`)

	// Without a namespace list every request is served, header or not,
	// as before.
	open := serve(t, nil)
	resp, out = post(t, open.url+"/encode", body(t, plain), map[string]string{"Authorization": bearer})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
}
