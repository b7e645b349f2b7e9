package payloadstore_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/storage/payloadstore"
)

// The workflow test suite does not apply ExternalStorage, so this drives
// the driver through converter.NewPayloadHTTPHandler, which runs the same
// storage and retrieval visitors (threshold check, driver selection,
// reference payloads) that the client and worker run on every message.
// A real server run is left to the integration tests.
func TestSDKStoresLargeActivityResultThroughDriver(t *testing.T) {
	dir := t.TempDir()
	storage, err := payloadstore.ExternalStorage(dir)
	require.NoError(t, err)
	driver := storage.Drivers[0].(*payloadstore.Driver)
	h, err := converter.NewPayloadHTTPHandler(converter.PayloadHTTPHandlerOptions{ExternalStorage: storage})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()

	type toolResult struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	}
	dc := converter.GetDefaultDataConverter()
	large, err := dc.ToPayload(toolResult{Kind: "success", Text: strings.Repeat("0123456789abcdef", 200*1024/16)})
	require.NoError(t, err)
	require.Greater(t, proto.Size(large), payloadstore.Threshold)
	small, err := dc.ToPayload(toolResult{Kind: "success", Text: "short"})
	require.NoError(t, err)

	encoded := post(t, srv.URL+"/encode", large, small)
	require.Len(t, encoded, 2)
	require.Less(t, proto.Size(encoded[0]), 1024, "large payload should be replaced by a small reference")
	require.Len(t, encoded[0].ExternalPayloads, 1)
	require.True(t, proto.Equal(small, encoded[1]), "payload under the threshold stays inline")

	objects, size, err := driver.Stats()
	require.NoError(t, err)
	require.Equal(t, 1, objects)
	require.Equal(t, int64(proto.Size(large)), size)

	decoded := post(t, srv.URL+"/decode", encoded...)
	require.True(t, proto.Equal(large, decoded[0]))
	var got toolResult
	require.NoError(t, dc.FromPayload(decoded[0], &got))
	require.Equal(t, "success", got.Kind)

	// A second worker process opening the same directory reads the claim.
	again, err := payloadstore.ExternalStorage(dir)
	require.NoError(t, err)
	h2, err := converter.NewPayloadHTTPHandler(converter.PayloadHTTPHandlerOptions{ExternalStorage: again})
	require.NoError(t, err)
	srv2 := httptest.NewServer(h2)
	defer srv2.Close()
	decoded = post(t, srv2.URL+"/decode", encoded[0])
	require.True(t, proto.Equal(large, decoded[0]))
}

func post(t *testing.T, url string, payloads ...*commonpb.Payload) []*commonpb.Payload {
	t.Helper()
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: payloads})
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	var got commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(out, &got))
	return got.Payloads
}
