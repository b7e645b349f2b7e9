package codec_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/storage/codec"
)

func key(t *testing.T, id string) codec.Key {
	t.Helper()
	k, err := codec.NewKey(id)
	require.NoError(t, err)
	return k
}

func ring(t *testing.T, keys ...codec.Key) *codec.Keyring {
	t.Helper()
	k, err := codec.New(keys...)
	require.NoError(t, err)
	return k
}

func payload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return p
}

func TestPayloadRoundTripHidesContent(t *testing.T) {
	k := ring(t, key(t, "k1"))
	small := payload(t, "marker-small-7f3a")
	large := payload(t, strings.Repeat("marker-large-7f3a ", 200))
	enc, err := k.Encode([]*commonpb.Payload{small, large})
	require.NoError(t, err)
	require.Len(t, enc, 2)
	for _, p := range enc {
		require.Equal(t, codec.EncodingEncrypted, string(p.Metadata[codec.MetadataEncoding]))
		require.Equal(t, "k1", string(p.Metadata[codec.MetadataKeyID]))
		require.NotContains(t, string(p.Data), "marker")
		// The original encoding is inside the ciphertext, not beside it.
		require.NotContains(t, string(p.Data), "json/plain")
	}
	require.NotContains(t, enc[0].Metadata, codec.MetadataCompressed, "a small payload is not compressed")
	require.Equal(t, codec.CompressionDeflate, string(enc[1].Metadata[codec.MetadataCompressed]))
	require.Less(t, len(enc[1].Data), len(large.Data)/4, "a repetitive large payload shrinks")

	dec, err := k.Decode(enc)
	require.NoError(t, err)
	var s1, s2 string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[0], &s1))
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[1], &s2))
	require.Equal(t, "marker-small-7f3a", s1)
	require.Equal(t, strings.Repeat("marker-large-7f3a ", 200), s2)
}

func TestDecodePassesPlainPayloadsThrough(t *testing.T) {
	k := ring(t, key(t, "k1"))
	plain := payload(t, "written before encryption was on")
	dec, err := k.Decode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	require.Same(t, plain, dec[0])
}

func TestRotation(t *testing.T) {
	old := key(t, "2026-05")
	cur := key(t, "2026-11")
	before := ring(t, old)
	after := ring(t, cur, old) // the new key encrypts, the old one only decrypts

	oldPayloads, err := before.Encode([]*commonpb.Payload{payload(t, "old secret")})
	require.NoError(t, err)
	oldBlob, err := before.Seal([]byte("old transcript"))
	require.NoError(t, err)

	dec, err := after.Decode(oldPayloads)
	require.NoError(t, err, "the old key still decrypts")
	var s string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[0], &s))
	require.Equal(t, "old secret", s)
	b, err := after.Open(oldBlob)
	require.NoError(t, err)
	require.Equal(t, "old transcript", string(b))

	newPayloads, err := after.Encode([]*commonpb.Payload{payload(t, "new secret")})
	require.NoError(t, err)
	require.Equal(t, "2026-11", string(newPayloads[0].Metadata[codec.MetadataKeyID]), "new payloads use the new key")
	require.Equal(t, "2026-11", after.EncryptKeyID())

	// A process that has only the old key names the key it lacks.
	_, err = before.Decode(newPayloads)
	require.ErrorIs(t, err, codec.ErrUnknownKey)
	require.Contains(t, err.Error(), `payload encrypted with key "2026-11", which this process does not have`)
}

func TestWrongKeyAndTampering(t *testing.T) {
	k := ring(t, key(t, "k1"))
	impostor := ring(t, key(t, "k1")) // same id, different material
	enc, err := k.Encode([]*commonpb.Payload{payload(t, "secret")})
	require.NoError(t, err)

	_, err = impostor.Decode(enc)
	require.ErrorIs(t, err, codec.ErrAuthentication)
	require.Contains(t, err.Error(), `key "k1"`)

	flipped := &commonpb.Payload{Metadata: enc[0].Metadata, Data: bytes.Clone(enc[0].Data)}
	flipped.Data[len(flipped.Data)-1] ^= 1
	_, err = k.Decode([]*commonpb.Payload{flipped})
	require.ErrorIs(t, err, codec.ErrAuthentication)

	// Claiming compression the sealer did not apply fails authentication:
	// the flag is bound to the ciphertext.
	md := map[string][]byte{}
	for k, v := range enc[0].Metadata {
		md[k] = v
	}
	md[codec.MetadataCompressed] = []byte(codec.CompressionDeflate)
	_, err = k.Decode([]*commonpb.Payload{{Metadata: md, Data: enc[0].Data}})
	require.ErrorIs(t, err, codec.ErrAuthentication)

	short := &commonpb.Payload{Metadata: enc[0].Metadata, Data: enc[0].Data[:5]}
	_, err = k.Decode([]*commonpb.Payload{short})
	require.ErrorIs(t, err, codec.ErrCorrupt)

	sealed, err := k.Seal([]byte("blob"))
	require.NoError(t, err)
	_, err = impostor.Open(sealed)
	require.ErrorIs(t, err, codec.ErrAuthentication)
	// Renaming the key in the header is caught too.
	renamed := bytes.Clone(sealed)
	renamed[5] = 'x' // the first byte of the key id
	_, err = ring(t, key(t, "x1"), codec.Key{ID: "k1", Secret: make([]byte, 32)}).Open(renamed)
	require.Error(t, err)
	_, err = k.Open([]byte("plain text, never sealed"))
	require.ErrorIs(t, err, codec.ErrCorrupt)
}

func TestSealRoundTrip(t *testing.T) {
	k := ring(t, key(t, "blob-key"))
	for _, size := range []int{0, 1, codec.CompressAbove - 1, codec.CompressAbove, 100_000} {
		plain := bytes.Repeat([]byte("marker "), size/7+1)[:size]
		sealed, err := k.Seal(plain)
		require.NoError(t, err)
		require.True(t, codec.IsSealed(sealed))
		if size > 0 {
			require.NotContains(t, string(sealed), "marker")
		}
		got, err := k.Open(sealed)
		require.NoError(t, err)
		require.Equal(t, plain, got, "size %d", size)
	}
	a, err := k.Seal([]byte("same"))
	require.NoError(t, err)
	b, err := k.Seal([]byte("same"))
	require.NoError(t, err)
	require.NotEqual(t, a, b, "a fresh nonce every time")
}

func TestKeyValidation(t *testing.T) {
	_, err := codec.New()
	require.ErrorContains(t, err, "no keys")
	_, err = codec.New(codec.Key{ID: "k", Secret: make([]byte, 16)})
	require.ErrorContains(t, err, "is 16 bytes; AES-256 needs exactly 32")
	_, err = codec.New(codec.Key{ID: "bad id", Secret: make([]byte, 32)})
	require.ErrorContains(t, err, "has id")
	_, err = codec.New(codec.Key{ID: "k", Secret: make([]byte, 32)}, codec.Key{ID: "k", Secret: make([]byte, 32)})
	require.ErrorContains(t, err, "appears twice")
}

func TestParseKeysFile(t *testing.T) {
	cur, old := key(t, "2026-11"), key(t, "2026-05")
	file := fmt.Sprintf("# keys\n\n%s\n  %s  \n", cur.Line(), old.Line())
	k, err := codec.Parse([]byte(file))
	require.NoError(t, err)
	require.Equal(t, "2026-11", k.EncryptKeyID())
	require.ElementsMatch(t, []string{"2026-11", "2026-05"}, k.KeyIDs())

	unpadded := "k:" + base64.RawStdEncoding.EncodeToString(cur.Secret)
	_, err = codec.Parse([]byte(unpadded))
	require.NoError(t, err, "unpadded base64 is accepted")

	for name, tc := range map[string]struct{ file, want string }{
		"empty":      {"# nothing\n", "holds no keys"},
		"no colon":   {"just-a-line\n", "line 1 is not id:base64-key"},
		"bad base64": {"# c\nk:!!!notbase64\n", "line 2 (key \"k\"): the key is not standard base64"},
		"short key":  {"k:" + base64.StdEncoding.EncodeToString(make([]byte, 31)), "is 31 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := codec.Parse([]byte(tc.file))
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "notbase64", "errors never quote key material")
		})
	}
}

func TestFromEnv(t *testing.T) {
	k, err := codec.FromEnv(func(string) string { return "" })
	require.NoError(t, err)
	require.Nil(t, k, "unset means encryption off")

	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte(key(t, "env-key").Line()+"\n"), 0o600))
	env := map[string]string{codec.EnvKeysFile: path}
	k, err = codec.FromEnv(func(n string) string { return env[n] })
	require.NoError(t, err)
	require.Equal(t, "env-key", k.EncryptKeyID())

	env[codec.EnvKeysFile] = filepath.Join(t.TempDir(), "missing")
	_, err = codec.FromEnv(func(n string) string { return env[n] })
	require.ErrorContains(t, err, codec.EnvKeysFile)
}

func TestDataConverter(t *testing.T) {
	k := ring(t, key(t, "dc"))
	dc := k.DataConverter()
	p, err := dc.ToPayload(map[string]string{"prompt": "marker-dc"})
	require.NoError(t, err)
	require.NotContains(t, string(p.Data), "marker-dc")
	var got map[string]string
	require.NoError(t, dc.FromPayload(p, &got))
	require.Equal(t, "marker-dc", got["prompt"])

	// Without the codec the payload is opaque binary, not the value.
	err = converter.GetDefaultDataConverter().FromPayload(p, &got)
	require.Error(t, err)
}

// Compressing before encrypting lets the ciphertext's length say how much
// attacker text matched a secret in the same payload. `compression=off`
// in the keys file turns it off for payloads and sealed blobs; what was
// compressed before still opens, whichever way a keyring is set.
func TestCompressionOffInKeysFile(t *testing.T) {
	k1 := key(t, "k1")
	on, err := codec.Parse([]byte(k1.Line() + "\n"))
	require.NoError(t, err)
	off, err := codec.Parse([]byte("# no length side channel\ncompression=off\n" + k1.Line() + "\n"))
	require.NoError(t, err)
	require.Equal(t, "k1", off.EncryptKeyID())
	require.Equal(t, []string{"k1"}, off.KeyIDs(), "an option is not a key")

	secret := "token=sk-live-7f3a9c01d2e4"
	guess := func(g string) *commonpb.Payload {
		return payload(t, strings.Repeat("filler text the page returned. ", 60)+g+" ... "+secret)
	}
	right, wrong := guess("token=sk-live-7f3a9c01d2e4"), guess("token=qx-wade-1b8e4z77h6k5")
	require.Equal(t, len(right.Data), len(wrong.Data))

	enc, err := off.Encode([]*commonpb.Payload{right, wrong})
	require.NoError(t, err)
	for _, p := range enc {
		require.NotContains(t, p.Metadata, codec.MetadataCompressed)
	}
	require.Equal(t, len(enc[0].Data), len(enc[1].Data), "the length says nothing about the guess")
	encOn, err := on.Encode([]*commonpb.Payload{right, wrong})
	require.NoError(t, err)
	require.Equal(t, codec.CompressionDeflate, string(encOn[0].Metadata[codec.MetadataCompressed]))

	// Either keyring reads what the other wrote.
	for _, pair := range [][2]*codec.Keyring{{on, off}, {off, on}} {
		src, err := pair[0].Encode([]*commonpb.Payload{right})
		require.NoError(t, err)
		dec, err := pair[1].Decode(src)
		require.NoError(t, err)
		require.Equal(t, right.Data, dec[0].Data)
	}

	blob := bytes.Repeat([]byte("transcript line with a secret "), 100)
	sealed, err := off.Seal(blob)
	require.NoError(t, err)
	require.Greater(t, len(sealed), len(blob), "a sealed blob is not compressed")
	got, err := on.Open(sealed)
	require.NoError(t, err)
	require.Equal(t, blob, got)
	sealedOn, err := on.Seal(blob)
	require.NoError(t, err)
	require.Less(t, len(sealedOn), len(blob))
	got, err = off.Open(sealedOn)
	require.NoError(t, err)
	require.Equal(t, blob, got, "a value compressed before compression was turned off still opens")

	explicit, err := codec.Parse([]byte("compression=deflate\n" + k1.Line()))
	require.NoError(t, err)
	encOn, err = explicit.Encode([]*commonpb.Payload{right})
	require.NoError(t, err)
	require.Equal(t, codec.CompressionDeflate, string(encOn[0].Metadata[codec.MetadataCompressed]))

	for name, tc := range map[string]struct{ file, want string }{
		"unknown value":  {"compression=gzip\n" + k1.Line(), `line 1: compression is "off" or "deflate", not "gzip"`},
		"unknown option": {"padding=on\n" + k1.Line(), `line 1: unknown option "padding"`},
		"twice":          {"compression=off\ncompression=off\n" + k1.Line(), "line 2: compression is set twice"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := codec.Parse([]byte(tc.file))
			require.ErrorContains(t, err, tc.want)
		})
	}
}
