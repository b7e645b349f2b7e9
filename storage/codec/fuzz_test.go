package codec_test

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"

	"github.com/tollgate-dev/tollgate/storage/codec"
)

// FuzzOpen feeds junk to Open and Decode: they must return an error or a
// value, never panic, and never accept what the key did not seal.
func FuzzOpen(f *testing.F) {
	k, err := codec.New(codec.Key{ID: "fuzz", Secret: make([]byte, codec.KeySize)})
	if err != nil {
		f.Fatal(err)
	}
	sealed, _ := k.Seal([]byte("seed"))
	f.Add(sealed)
	f.Add([]byte("TGC1"))
	f.Add([]byte("TGC1\x04fuzz\x00"))
	f.Add([]byte("TGC1\xfffuzz"))
	f.Add([]byte{})
	enc, _ := k.Encode([]*commonpb.Payload{{Data: []byte("seed")}})
	f.Add(enc[0].Data)
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, err := k.Open(b); err == nil {
			// Only a genuine seal opens; re-sealing what opened must
			// round-trip.
			again, err := k.Seal(got)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := k.Open(again); err != nil {
				t.Fatal(err)
			}
		}
		for _, compressed := range []bool{false, true} {
			md := map[string][]byte{
				codec.MetadataEncoding: []byte(codec.EncodingEncrypted),
				codec.MetadataKeyID:    []byte("fuzz"),
			}
			if compressed {
				md[codec.MetadataCompressed] = []byte(codec.CompressionDeflate)
			}
			_, _ = k.Decode([]*commonpb.Payload{{Metadata: md, Data: b}})
		}
	})
}
