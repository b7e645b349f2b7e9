package metrics

import (
	"errors"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/storage/payloadstore"
)

// CountStorage returns ext with its drivers counting, on h, the bytes of
// the payloads they store (PayloadStoreBytes, store history) and the
// claims whose object is missing (PayloadStoreMisses). The drivers keep
// their names, so claims written with and without counting read alike. A
// nil handler, or a configuration that routes payloads with its own
// selector (which names driver instances the wrappers would hide), is
// returned as it is.
func CountStorage(ext converter.ExternalStorage, h client.MetricsHandler) converter.ExternalStorage {
	if h == nil || ext.DriverSelector != nil || len(ext.Drivers) == 0 {
		return ext
	}
	drivers := make([]converter.StorageDriver, len(ext.Drivers))
	for i, d := range ext.Drivers {
		drivers[i] = countingDriver{StorageDriver: d, h: h}
	}
	ext.Drivers = drivers
	return ext
}

type countingDriver struct {
	converter.StorageDriver
	h client.MetricsHandler
}

func (d countingDriver) Store(ctx converter.StorageDriverStoreContext, payloads []*commonpb.Payload) ([]converter.StorageDriverClaim, error) {
	claims, err := d.StorageDriver.Store(ctx, payloads)
	if err == nil {
		var n int64
		for _, p := range payloads {
			n += int64(proto.Size(p))
		}
		Count(d.h, PayloadStoreBytes, n, map[string]string{Store: StoreHistory})
	}
	return claims, err
}

func (d countingDriver) Retrieve(ctx converter.StorageDriverRetrieveContext, claims []converter.StorageDriverClaim) ([]*commonpb.Payload, error) {
	payloads, err := d.StorageDriver.Retrieve(ctx, claims)
	if errors.Is(err, payloadstore.ErrObjectMissing) {
		Count(d.h, PayloadStoreMisses, 1, map[string]string{Store: StoreHistory})
	}
	return payloads, err
}
