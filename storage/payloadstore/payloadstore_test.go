package payloadstore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"gocloud.dev/blob/memblob"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/storage/blobstore"
)

func storeCtx() converter.StorageDriverStoreContext {
	return converter.StorageDriverStoreContext{Context: context.Background()}
}

func retrieveCtx() converter.StorageDriverRetrieveContext {
	return converter.StorageDriverRetrieveContext{Context: context.Background()}
}

func payload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return p
}

func TestStoreRetrieveRoundTrip(t *testing.T) {
	d, err := New(t.TempDir())
	require.NoError(t, err)
	in := []*commonpb.Payload{payload(t, "first"), payload(t, map[string]int{"b": 2, "a": 1})}

	claims, err := d.Store(storeCtx(), in)
	require.NoError(t, err)
	require.Len(t, claims, 2)

	out, err := d.Retrieve(retrieveCtx(), claims)
	require.NoError(t, err)
	require.Len(t, out, 2)
	for i := range in {
		require.True(t, proto.Equal(in[i], out[i]), "payload %d", i)
	}
}

func TestContentAddressing(t *testing.T) {
	dir := t.TempDir()
	d, err := New(dir)
	require.NoError(t, err)
	p := payload(t, strings.Repeat("x", 1000))

	first, err := d.Store(storeCtx(), []*commonpb.Payload{p})
	require.NoError(t, err)
	again, err := d.Store(storeCtx(), []*commonpb.Payload{proto.Clone(p).(*commonpb.Payload), p})
	require.NoError(t, err)
	require.Equal(t, first[0], again[0])
	require.Equal(t, first[0], again[1])

	key := first[0].ClaimData[claimKey]
	require.Len(t, key, 64)
	info, err := os.Stat(filepath.Join(dir, "objects", key[:2], key[2:]))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	objects, size, err := d.Stats()
	require.NoError(t, err)
	require.Equal(t, 1, objects)
	require.Equal(t, int64(proto.Size(p)), size)

	_, err = d.Store(storeCtx(), []*commonpb.Payload{payload(t, "other")})
	require.NoError(t, err)
	objects, _, err = d.Stats()
	require.NoError(t, err)
	require.Equal(t, 2, objects)
}

func TestAtomicWriteLeavesNoTempFiles(t *testing.T) {
	dir := t.TempDir()
	d, err := New(dir)
	require.NoError(t, err)
	for i := range 5 {
		_, err := d.Store(storeCtx(), []*commonpb.Payload{payload(t, i)})
		require.NoError(t, err)
	}
	err = filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		require.NoError(t, err)
		require.False(t, strings.HasSuffix(e.Name(), ".tmp") || strings.HasPrefix(e.Name(), "."), "temp file left behind: %s", path)
		return nil
	})
	require.NoError(t, err)

	// A temp file a crashed writer left is not counted as an object.
	key := strings.Repeat("ab", 32)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "objects", "ab"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "objects", "ab", key[2:]+".18a2b3c4.tmp"), []byte("half"), 0o600))
	objects, _, err := d.Stats()
	require.NoError(t, err)
	require.Equal(t, 5, objects)
	_, err = d.Retrieve(retrieveCtx(), []converter.StorageDriverClaim{{ClaimData: map[string]string{claimKey: key}}})
	require.ErrorIs(t, err, ErrObjectMissing)
}

func TestRetrieveMissingObject(t *testing.T) {
	dir := t.TempDir()
	d, err := New(dir)
	require.NoError(t, err)
	claims, err := d.Store(storeCtx(), []*commonpb.Payload{payload(t, "gone")})
	require.NoError(t, err)
	key := claims[0].ClaimData[claimKey]
	require.NoError(t, os.Remove(filepath.Join(dir, "objects", key[:2], key[2:])))

	_, err = d.Retrieve(retrieveCtx(), claims)
	require.ErrorIs(t, err, ErrObjectMissing)
	require.ErrorContains(t, err, key)
}

func TestRetrieveCorruptObject(t *testing.T) {
	dir := t.TempDir()
	d, err := New(dir)
	require.NoError(t, err)
	p := payload(t, "precious")
	claims, err := d.Store(storeCtx(), []*commonpb.Payload{p})
	require.NoError(t, err)
	key := claims[0].ClaimData[claimKey]
	path := filepath.Join(dir, "objects", key[:2], key[2:])
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[len(data)-1] ^= 0xff
	require.NoError(t, os.WriteFile(path, data, 0o600))

	_, err = d.Retrieve(retrieveCtx(), claims)
	require.ErrorIs(t, err, ErrObjectCorrupt)
	require.ErrorContains(t, err, key)

	// Storing the payload again repairs the damaged object.
	_, err = d.Store(storeCtx(), []*commonpb.Payload{p})
	require.NoError(t, err)
	out, err := d.Retrieve(retrieveCtx(), claims)
	require.NoError(t, err)
	require.True(t, proto.Equal(p, out[0]))
}

func TestRetrieveRejectsBadClaims(t *testing.T) {
	d, err := New(t.TempDir())
	require.NoError(t, err)
	for name, claim := range map[string]map[string]string{
		"no key":    {},
		"traversal": {claimKey: "../../../../etc/passwd"},
		"short":     {claimKey: "abcd"},
		"uppercase": {claimKey: strings.Repeat("AB", 32)},
		"not hex":   {claimKey: strings.Repeat("zz", 32)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := d.Retrieve(retrieveCtx(), []converter.StorageDriverClaim{{ClaimData: claim}})
			require.ErrorContains(t, err, "no valid sha256 key")
		})
	}
}

func TestCancelledContext(t *testing.T) {
	d, err := New(t.TempDir())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = d.Store(converter.StorageDriverStoreContext{Context: ctx}, []*commonpb.Payload{payload(t, 1)})
	require.ErrorIs(t, err, context.Canceled)
}

func TestNewRejectsEmptyDir(t *testing.T) {
	_, err := New("")
	require.Error(t, err)
}

func TestExternalStorageConfig(t *testing.T) {
	s, err := ExternalStorage(t.TempDir())
	require.NoError(t, err)
	require.Equal(t, Threshold, s.PayloadSizeThreshold)
	require.Len(t, s.Drivers, 1)
	require.Equal(t, DriverName, s.Drivers[0].Name())
}

func TestRawOutputsRoundTripAndRefuseOtherReferences(t *testing.T) {
	d, err := New(t.TempDir())
	require.NoError(t, err)
	ref, err := d.PutRaw(context.Background(), "whole output")
	require.NoError(t, err)
	got, err := d.GetRaw(ref)
	require.NoError(t, err)
	require.Equal(t, "whole output", got)

	_, err = d.GetRaw("../../etc/passwd")
	require.ErrorContains(t, err, "not a raw output reference")
	_, err = d.GetRaw("sha256:" + strings.Repeat("0", 64))
	require.ErrorIs(t, err, ErrObjectMissing)

	// A payload the SDK stored is not a tool output.
	claims, err := d.Store(storeCtx(), []*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"x"`)}})
	require.NoError(t, err)
	_, err = d.GetRaw("sha256:" + claims[0].ClaimData[claimKey])
	require.ErrorContains(t, err, "not a tool's output")
}

// A data directory written before blob URLs existed (payloads under
// payloads/objects) reads through the data directory's blob store, and
// both constructors write the same files.
func TestDataDirectoryStoreReadsTheOldLayout(t *testing.T) {
	data := t.TempDir()
	old, err := New(filepath.Join(data, "payloads"))
	require.NoError(t, err)
	p := payload(t, "written by an older worker")
	claims, err := old.Store(storeCtx(), []*commonpb.Payload{p})
	require.NoError(t, err)

	store, err := blobstore.Open(context.Background(), blobstore.Options{DataDir: data})
	require.NoError(t, err)
	d := NewDriver(store)
	out, err := d.Retrieve(retrieveCtx(), claims)
	require.NoError(t, err)
	require.True(t, proto.Equal(p, out[0]))

	again, err := d.Store(storeCtx(), []*commonpb.Payload{p})
	require.NoError(t, err)
	require.Equal(t, claims, again)
	n, _, err := d.Stats()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, DriverName, d.Storage().Drivers[0].Name())
}

// The driver works on any bucket, not only a directory.
func TestDriverOnABucket(t *testing.T) {
	d := NewDriver(blobstore.NewBucket(memblob.OpenBucket(nil), nil))
	p := payload(t, strings.Repeat("y", 300*1024))
	claims, err := d.Store(storeCtx(), []*commonpb.Payload{p})
	require.NoError(t, err)
	out, err := d.Retrieve(retrieveCtx(), claims)
	require.NoError(t, err)
	require.True(t, proto.Equal(p, out[0]))
	ref, err := d.PutRaw(context.Background(), "big output")
	require.NoError(t, err)
	got, err := d.GetRawContext(context.Background(), ref)
	require.NoError(t, err)
	require.Equal(t, "big output", got)

	_, err = d.Retrieve(retrieveCtx(), []converter.StorageDriverClaim{{ClaimData: map[string]string{claimKey: blobstore.Sum([]byte("absent"))}}})
	require.ErrorIs(t, err, ErrObjectMissing)
}
