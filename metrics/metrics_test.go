package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/metrics/metricstest"
	"github.com/tollgate-dev/tollgate/storage/payloadstore"
)

func TestOneOfKeepsKnownValuesOnly(t *testing.T) {
	require.Equal(t, "approve", metrics.OneOf("approve", "approve", "deny"))
	require.Equal(t, metrics.Other, metrics.OneOf("approve; drop table", "approve", "deny"))
	require.Equal(t, metrics.Other, metrics.OneOf("", "approve"))
}

func TestCappedAdmitsAFixedNumberOfValues(t *testing.T) {
	c := metrics.NewCapped(3)
	for i := range 3 {
		require.Equal(t, fmt.Sprint("m", i), c.Label(fmt.Sprint("m", i)))
	}
	require.Equal(t, metrics.Other, c.Label("m3"), "a fourth value is over the cap")
	require.Equal(t, "m1", c.Label("m1"), "admitted values stay admitted")
	require.Equal(t, metrics.Other, c.Label(""))
	require.Equal(t, metrics.Other, c.Label(strings.Repeat("x", metrics.MaxLabelBytes+1)))
}

func TestCappedHoldsItsCapUnderConcurrentUse(t *testing.T) {
	c := metrics.NewCapped(10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]bool{}
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				l := c.Label(fmt.Sprintf("g%d-%d", g, i))
				mu.Lock()
				seen[l] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 11, "ten admitted values and other")
	require.True(t, seen[metrics.Other])
}

func TestCountStorageCountsStoredBytesAndMisses(t *testing.T) {
	ext, err := payloadstore.ExternalStorage(t.TempDir())
	require.NoError(t, err)
	rec := metricstest.New()
	counted := metrics.CountStorage(ext, rec)
	require.Len(t, counted.Drivers, 1)
	d := counted.Drivers[0]
	require.Equal(t, payloadstore.DriverName, d.Name(), "claims name the same driver with or without counting")
	require.Equal(t, ext.PayloadSizeThreshold, counted.PayloadSizeThreshold)

	p := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(strings.Repeat("a", 1000))}
	claims, err := d.Store(converter.StorageDriverStoreContext{Context: context.Background()}, []*commonpb.Payload{p, p})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"tollgate_payload_store_bytes{store=history}": int64(2 * proto.Size(p))}, rec.Counters(metrics.PayloadStoreBytes))

	got, err := d.Retrieve(converter.StorageDriverRetrieveContext{Context: context.Background()}, claims[:1])
	require.NoError(t, err)
	require.True(t, proto.Equal(p, got[0]))
	require.Empty(t, rec.Counters(metrics.PayloadStoreMisses))

	missing := converter.StorageDriverClaim{ClaimData: map[string]string{"sha256": strings.Repeat("0", 64)}}
	_, err = d.Retrieve(converter.StorageDriverRetrieveContext{Context: context.Background()}, []converter.StorageDriverClaim{missing})
	require.ErrorIs(t, err, payloadstore.ErrObjectMissing)
	require.Equal(t, map[string]int64{"tollgate_payload_store_misses{store=history}": 1}, rec.Counters(metrics.PayloadStoreMisses))
}

func TestCountStorageWithoutAHandlerChangesNothing(t *testing.T) {
	ext, err := payloadstore.ExternalStorage(t.TempDir())
	require.NoError(t, err)
	got := metrics.CountStorage(ext, nil)
	require.Same(t, ext.Drivers[0], got.Drivers[0])
}
