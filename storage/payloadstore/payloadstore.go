// Package payloadstore is the Temporal SDK's external payload storage
// for Tollgate. Payloads at or over Threshold leave workflow history and
// live as content-addressed blobs in a blobstore.Store (the data
// directory by default, or the bucket TOLLGATE_BLOB_URL names); the
// history keeps a small claim naming the object. Large tool outputs live
// beside them.
//
// The worker, the client and the replayer must all be given the same
// store, or the replayer cannot read the histories the worker wrote.
package payloadstore

import (
	"context"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/storage/blobstore"
)

// Threshold is the serialized payload size at and above which a payload is
// stored outside history. DESIGN promises no history event carries a
// payload over 128 KiB; the SDK's own default is 256 KiB.
const Threshold = 128 * 1024

const (
	// DriverName is persisted in history next to every claim. Renaming it
	// makes every stored payload unreadable, so it is a constant, and it
	// keeps the name it had when the store could only be a directory.
	DriverName = "tollgate-fs"
	// DriverType identifies the implementation, whatever the instance name.
	DriverType = "tollgate.blob"

	// claimKey holds the hex sha256 of the stored bytes in a claim.
	claimKey = "sha256"
)

// Space is where payloads live in a blob store shared with the
// transcripts: payloads/objects/ab/cdef…, the layout the data directory
// always had. A history cannot be recreated from anything else, so
// directory stores sync each payload.
var Space = blobstore.Space{Prefix: "payloads/objects/", Durable: true}

// ErrObjectMissing and ErrObjectCorrupt classify Retrieve failures.
var (
	ErrObjectMissing = blobstore.ErrMissing
	ErrObjectCorrupt = blobstore.ErrCorrupt
)

// Driver stores payloads as blobs named by the sha256 of their serialized
// proto, so storing the same payload twice (a retried activity, the same
// conversation prefix sent again) costs one blob.
type Driver struct {
	store *blobstore.Store
	space blobstore.Space
}

var _ converter.StorageDriver = (*Driver)(nil)

// NewDriver keeps payloads in store, under Space.
func NewDriver(store *blobstore.Store) *Driver {
	return &Driver{store: store, space: Space}
}

// New opens (creating if needed) a directory store rooted at dir, the
// payload directory of a data directory (datadir.Payloads): it reads and
// writes the same files as NewDriver on the data directory's store.
func New(dir string) (*Driver, error) {
	store, err := blobstore.OpenDir(dir, nil)
	if err != nil {
		return nil, fmt.Errorf("payloadstore: %w", err)
	}
	return &Driver{store: store, space: blobstore.Space{Prefix: "objects/", Durable: true}}, nil
}

// Storage is the SDK configuration that routes every payload of
// Threshold bytes or more through d. Give the same value to
// client.Options, worker clients and worker.WorkflowReplayerOptions.
func (d *Driver) Storage() converter.ExternalStorage {
	return converter.ExternalStorage{
		Drivers:              []converter.StorageDriver{d},
		PayloadSizeThreshold: Threshold,
	}
}

// ExternalStorage is New(dir).Storage(): the payload directory dir.
func ExternalStorage(dir string) (converter.ExternalStorage, error) {
	d, err := New(dir)
	if err != nil {
		return converter.ExternalStorage{}, err
	}
	return d.Storage(), nil
}

// Blobs is the store the payloads are kept in.
func (d *Driver) Blobs() *blobstore.Store { return d.store }

func (d *Driver) Name() string { return DriverName }
func (d *Driver) Type() string { return DriverType }

// Store writes each payload unless an intact copy is already there.
func (d *Driver) Store(ctx converter.StorageDriverStoreContext, payloads []*commonpb.Payload) ([]converter.StorageDriverClaim, error) {
	claims := make([]converter.StorageDriverClaim, len(payloads))
	limiter := ctx.GetLimiter()
	for i, p := range payloads {
		err := limiter.Permit(ctx.Context, p, func() error {
			if err := ctx.Context.Err(); err != nil {
				return err
			}
			key, err := d.put(ctx.Context, p)
			if err != nil {
				return err
			}
			claims[i] = converter.StorageDriverClaim{ClaimData: map[string]string{claimKey: key}}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("payloadstore: store payload %d of %d: %w", i+1, len(payloads), err)
		}
	}
	return claims, nil
}

// Retrieve reads and verifies the payload behind each claim.
func (d *Driver) Retrieve(ctx converter.StorageDriverRetrieveContext, claims []converter.StorageDriverClaim) ([]*commonpb.Payload, error) {
	payloads := make([]*commonpb.Payload, len(claims))
	limiter := ctx.GetLimiter()
	for i, c := range claims {
		err := limiter.Permit(ctx.Context, c, func() error {
			if err := ctx.Context.Err(); err != nil {
				return err
			}
			p, err := d.get(ctx.Context, c)
			if err != nil {
				return err
			}
			payloads[i] = p
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("payloadstore: retrieve: %w", err)
		}
	}
	return payloads, nil
}

// Stats counts the stored objects and their bytes, for benchmarks that
// measure how storage grows per step.
func (d *Driver) Stats() (objects int, bytes int64, err error) {
	objects, bytes, err = d.store.Stats(context.Background(), d.space)
	if err != nil {
		return 0, 0, fmt.Errorf("payloadstore: %w", err)
	}
	return objects, bytes, nil
}

// rawRefPrefix marks a reference PutRaw hands out, so a reference from
// anywhere else is refused rather than looked up.
const rawRefPrefix = "sha256:"

// rawEncoding marks a stored tool output, which is text, not a payload a
// data converter wrote.
const rawEncoding = "text/plain"

// PutRaw stores a tool's whole output, too large to carry on a call's
// card, and returns the reference the card carries instead.
func (d *Driver) PutRaw(ctx context.Context, raw string) (string, error) {
	key, err := d.put(ctx, &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(rawEncoding)}, Data: []byte(raw)})
	if err != nil {
		return "", fmt.Errorf("payloadstore: %w", err)
	}
	return rawRefPrefix + key, nil
}

// GetRaw reads back, verified, the output PutRaw stored under ref.
func (d *Driver) GetRaw(ref string) (string, error) {
	return d.GetRawContext(context.Background(), ref)
}

// GetRawContext is GetRaw with a context, for remote stores.
func (d *Driver) GetRawContext(ctx context.Context, ref string) (string, error) {
	key, ok := strings.CutPrefix(ref, rawRefPrefix)
	if !ok {
		return "", fmt.Errorf("payloadstore: %q is not a raw output reference (sha256:<hex>)", ref)
	}
	p, err := d.get(ctx, converter.StorageDriverClaim{ClaimData: map[string]string{claimKey: key}})
	if err != nil {
		return "", fmt.Errorf("payloadstore: %w", err)
	}
	if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != rawEncoding {
		return "", fmt.Errorf("payloadstore: %s holds a %q payload, not a tool's output", ref, enc)
	}
	return string(p.GetData()), nil
}

func (d *Driver) put(ctx context.Context, p *commonpb.Payload) (string, error) {
	// Deterministic so that equal payloads (same metadata map) hash equally.
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("serialize payload: %w", err)
	}
	return d.store.Put(ctx, d.space, data)
}

func (d *Driver) get(ctx context.Context, c converter.StorageDriverClaim) (*commonpb.Payload, error) {
	key := c.ClaimData[claimKey]
	if !blobstore.ValidSum(key) {
		// A claim read from history must not name anything outside the
		// store.
		return nil, fmt.Errorf("claim %v has no valid %s key", c.ClaimData, claimKey)
	}
	data, err := d.store.Get(ctx, d.space, key)
	if err != nil {
		return nil, fmt.Errorf("object sha256=%s: %w", key, err)
	}
	var p commonpb.Payload
	if err := proto.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("object sha256=%s: %w: %v", key, ErrObjectCorrupt, err)
	}
	return &p, nil
}
