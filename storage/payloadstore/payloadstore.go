// Package payloadstore is a filesystem driver for the Temporal SDK's
// external payload storage. Payloads at or over Threshold leave workflow
// history and live as content-addressed files in the data directory; the
// history keeps a small claim naming the object. It suits one machine (the
// dev server, a single worker host) or a directory every worker shares.
//
// The worker, the client and the replayer must all be given the same
// ExternalStorage, or the replayer cannot read the histories the worker
// wrote.
package payloadstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/storage/atomicfile"
)

// Threshold is the serialized payload size at and above which a payload is
// stored outside history. DESIGN promises no history event carries a
// payload over 128 KiB; the SDK's own default is 256 KiB.
const Threshold = 128 * 1024

const (
	// DriverName is persisted in history next to every claim. Renaming it
	// makes every stored payload unreadable, so it is a constant.
	DriverName = "tollgate-fs"
	// DriverType identifies the implementation, whatever the instance name.
	DriverType = "tollgate.filesystem"

	// claimKey holds the hex sha256 of the stored bytes in a claim.
	claimKey    = "sha256"
	objectsDir  = "objects"
	filePerm    = 0o600
	dirPerm     = 0o700
	hexHashSize = sha256.Size * 2
)

// ErrObjectMissing and ErrObjectCorrupt classify Retrieve failures.
var (
	ErrObjectMissing = errors.New("stored payload is missing")
	ErrObjectCorrupt = errors.New("stored payload is corrupt")
)

// Driver stores payloads as files named by the sha256 of their serialized
// proto, so storing the same payload twice (a retried activity, the same
// conversation prefix sent again) costs one file.
type Driver struct {
	root string
}

var _ converter.StorageDriver = (*Driver)(nil)

// New opens (creating if needed) a store rooted at dir. Payloads hold
// conversation content, so the directories are private to the user.
func New(dir string) (*Driver, error) {
	if dir == "" {
		return nil, errors.New("payloadstore: directory is empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("payloadstore: resolve %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(abs, objectsDir), dirPerm); err != nil {
		return nil, fmt.Errorf("payloadstore: create %s: %w", abs, err)
	}
	return &Driver{root: abs}, nil
}

// ExternalStorage returns the SDK configuration that routes every payload
// of Threshold bytes or more through a Driver rooted at dir. Give the same
// value to client.Options, worker clients and worker.WorkflowReplayerOptions.
func ExternalStorage(dir string) (converter.ExternalStorage, error) {
	d, err := New(dir)
	if err != nil {
		return converter.ExternalStorage{}, err
	}
	return converter.ExternalStorage{
		Drivers:              []converter.StorageDriver{d},
		PayloadSizeThreshold: Threshold,
	}, nil
}

// Dir is the root directory of the store.
func (d *Driver) Dir() string { return d.root }

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
			key, err := d.put(p)
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
			p, err := d.get(c)
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
	err = filepath.WalkDir(filepath.Join(d.root, objectsDir), func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		objects++
		bytes += info.Size()
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("payloadstore: stats of %s: %w", d.root, err)
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
func (d *Driver) PutRaw(_ context.Context, raw string) (string, error) {
	key, err := d.put(&commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(rawEncoding)}, Data: []byte(raw)})
	if err != nil {
		return "", fmt.Errorf("payloadstore: %w", err)
	}
	return rawRefPrefix + key, nil
}

// GetRaw reads back, verified, the output PutRaw stored under ref.
func (d *Driver) GetRaw(ref string) (string, error) {
	key, ok := strings.CutPrefix(ref, rawRefPrefix)
	if !ok {
		return "", fmt.Errorf("payloadstore: %q is not a raw output reference (sha256:<hex>)", ref)
	}
	p, err := d.get(converter.StorageDriverClaim{ClaimData: map[string]string{claimKey: key}})
	if err != nil {
		return "", fmt.Errorf("payloadstore: %w", err)
	}
	if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != rawEncoding {
		return "", fmt.Errorf("payloadstore: %s holds a %q payload, not a tool's output", ref, enc)
	}
	return string(p.GetData()), nil
}

func (d *Driver) put(p *commonpb.Payload) (string, error) {
	// Deterministic so that equal payloads (same metadata map) hash equally.
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("serialize payload: %w", err)
	}
	sum := sha256.Sum256(data)
	key := hex.EncodeToString(sum[:])
	path := d.objectPath(key)
	// Re-storing is the common case (a retried activity). Only rewrite an
	// object whose bytes no longer match its name, which heals a file
	// damaged on disk instead of trusting it forever.
	if existing, err := os.ReadFile(path); err == nil && bytes.Equal(existing, data) {
		return key, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return "", fmt.Errorf("write object %s: %w", key, err)
	}
	if err := atomicfile.Write(path, data, filePerm); err != nil {
		return "", fmt.Errorf("write object %s: %w", key, err)
	}
	return key, nil
}

func (d *Driver) get(c converter.StorageDriverClaim) (*commonpb.Payload, error) {
	key := c.ClaimData[claimKey]
	if !validKey(key) {
		return nil, fmt.Errorf("claim %v has no valid %s key", c.ClaimData, claimKey)
	}
	path := d.objectPath(key)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("object sha256=%s (%s): %w", key, path, ErrObjectMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("read object sha256=%s (%s): %w", key, path, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != key {
		return nil, fmt.Errorf("object sha256=%s (%s) does not match its hash: %w", key, path, ErrObjectCorrupt)
	}
	var p commonpb.Payload
	if err := proto.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("object sha256=%s (%s): %w: %v", key, path, ErrObjectCorrupt, err)
	}
	return &p, nil
}

func (d *Driver) objectPath(key string) string {
	return filepath.Join(d.root, objectsDir, key[:2], key[2:])
}

// validKey keeps a claim read from history from naming a path outside the
// store.
func validKey(key string) bool {
	if len(key) != hexHashSize {
		return false
	}
	_, err := hex.DecodeString(key)
	return err == nil && strings.ToLower(key) == key
}
