// Package codec encrypts what Tollgate keeps: every Temporal payload (as a
// converter.PayloadCodec, so history holds ciphertext and the payload
// store holds it too, since the SDK runs the codec before external
// storage) and any byte blob a store writes (Seal and Open: transcripts,
// connection tokens).
//
// The cipher is AES-256-GCM. Each sealed value names the key that sealed
// it, so keys rotate: a Keyring has one encrypt key and any number of
// decrypt-only keys for what older keys sealed. Values of CompressAbove
// bytes or more are compressed (DEFLATE) before they are encrypted, unless
// the keys file says `compression=off`: compressing before encrypting
// lets a ciphertext's length reveal how much attacker-supplied text
// matches a secret in the same value. Decoding reads compressed values
// either way.
//
// Keys come from a keys file named by TOLLGATE_CODEC_KEYS_FILE (see Parse
// for the format), so the worker, the starter, the gateway and the
// replayer share them without flags.
package codec

import (
	"bytes"
	"compress/flate"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// EnvKeysFile names the keys file every Tollgate process reads.
const EnvKeysFile = "TOLLGATE_CODEC_KEYS_FILE"

// KeySize is the length of an AES-256 key in bytes.
const KeySize = 32

// CompressAbove is the plaintext size at and above which a value is
// compressed before it is encrypted. Smaller values rarely shrink.
const CompressAbove = 1024

// maxPlaintext bounds what decompression may produce, so a forged value
// that passed authentication (it cannot, without a key) or a bug cannot
// exhaust memory. Temporal's own payload limits are far below it.
const maxPlaintext = 256 << 20

// Payload metadata an encrypted payload carries. The encoding tells
// tools that do not know the codec (the UI without a codec server, tctl)
// what they are looking at.
const (
	MetadataEncoding   = "encoding"
	EncodingEncrypted  = "binary/encrypted"
	MetadataKeyID      = "encryption-key-id"
	MetadataCipher     = "encryption-cipher"
	CipherAES256GCM    = "AES256-GCM"
	MetadataCompressed = "tollgate-compression"
	CompressionDeflate = "deflate"
)

// Errors a Decode or Open can wrap; match them with errors.Is.
var (
	// ErrUnknownKey: the value names a key this keyring does not have.
	ErrUnknownKey = errors.New("unknown encryption key")
	// ErrAuthentication: the key with that id did not open the value, so
	// the key material differs from the one that sealed it, or the value
	// was changed after it was sealed.
	ErrAuthentication = errors.New("wrong key or tampered ciphertext")
	// ErrCorrupt: the value is not something this package sealed.
	ErrCorrupt = errors.New("corrupt encrypted value")
)

// Key is one named AES-256 key.
type Key struct {
	// ID is written next to everything the key seals: 1 to 64 letters,
	// digits, '.', '_' or '-'. Never reuse an id for different material.
	ID string
	// Secret is the 32 bytes of key material.
	Secret []byte
}

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Keyring encrypts with its first key and decrypts with any of them. It
// is safe for concurrent use.
type Keyring struct {
	encrypt string
	aeads   map[string]cipher.AEAD
	// noCompress: the zero value compresses, as keyrings always did.
	noCompress bool
}

var _ converter.PayloadCodec = (*Keyring)(nil)

// New builds a keyring; keys[0] encrypts, the others only decrypt.
func New(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("codec: no keys; a keyring needs at least the key it encrypts with")
	}
	k := &Keyring{encrypt: keys[0].ID, aeads: make(map[string]cipher.AEAD, len(keys))}
	for i, key := range keys {
		if !keyIDPattern.MatchString(key.ID) {
			return nil, fmt.Errorf("codec: key %d has id %q; an id is 1 to 64 letters, digits, '.', '_' or '-'", i+1, key.ID)
		}
		if len(key.Secret) != KeySize {
			return nil, fmt.Errorf("codec: key %q is %d bytes; AES-256 needs exactly %d", key.ID, len(key.Secret), KeySize)
		}
		if _, dup := k.aeads[key.ID]; dup {
			return nil, fmt.Errorf("codec: key id %q appears twice", key.ID)
		}
		block, err := aes.NewCipher(key.Secret)
		if err != nil {
			return nil, fmt.Errorf("codec: key %q: %w", key.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("codec: key %q: %w", key.ID, err)
		}
		k.aeads[key.ID] = aead
	}
	return k, nil
}

// Parse reads a keys file: one key a line, `id:base64`, where base64 is
// the standard encoding of 32 random bytes (`openssl rand -base64 32`).
// The first key encrypts; the keys after it only decrypt, for what older
// keys sealed. Blank lines and lines starting with '#' are ignored. The
// line `compression=off` stops compression before encryption (the
// default, `compression=deflate`, compresses values of CompressAbove
// bytes or more); builds before the option refuse a file that has it.
//
//	# rotated 2026-11-30; 2026-05 stays until nothing sealed with it is read
//	compression=off
//	2026-11:3q2+7w...=
//	2026-05:Zm9vYmFy...=
func Parse(data []byte) (*Keyring, error) {
	keys, opts, err := parseFile(data)
	if err != nil {
		return nil, err
	}
	k, err := New(keys...)
	if err != nil {
		return nil, err
	}
	return k.WithCompression(!opts.noCompress), nil
}

// ParseKeys reads a keys file (see Parse) into its keys, in file order;
// options are checked and left out.
func ParseKeys(data []byte) ([]Key, error) {
	keys, _, err := parseFile(data)
	return keys, err
}

// fileOptions are the keys file's `name=value` lines.
type fileOptions struct {
	compressionSet bool
	noCompress     bool
}

func parseFile(data []byte) ([]Key, fileOptions, error) {
	var keys []Key
	var opts fileOptions
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// A key id cannot hold '=' and a key line's base64 comes after
		// its ':', so a line with '=' and no ':' is an option.
		if name, value, ok := strings.Cut(line, "="); ok && !strings.Contains(line, ":") {
			if err := opts.set(strings.TrimSpace(name), strings.TrimSpace(value)); err != nil {
				return nil, opts, fmt.Errorf("codec: keys file line %d: %w", n+1, err)
			}
			continue
		}
		id, secret, ok := strings.Cut(line, ":")
		if !ok {
			return nil, opts, fmt.Errorf("codec: keys file line %d is not id:base64-key", n+1)
		}
		id, secret = strings.TrimSpace(id), strings.TrimSpace(secret)
		raw, err := base64.StdEncoding.DecodeString(secret)
		if err != nil {
			if raw, err = base64.RawStdEncoding.DecodeString(secret); err != nil {
				// The error would quote key material; say where instead.
				return nil, opts, fmt.Errorf("codec: keys file line %d (key %q): the key is not standard base64", n+1, id)
			}
		}
		keys = append(keys, Key{ID: id, Secret: raw})
	}
	if len(keys) == 0 {
		return nil, opts, errors.New("codec: the keys file holds no keys (one `id:base64-key` a line)")
	}
	return keys, opts, nil
}

func (o *fileOptions) set(name, value string) error {
	switch name {
	case "compression":
		if o.compressionSet {
			return errors.New("compression is set twice")
		}
		switch value {
		case "off":
			o.noCompress = true
		case CompressionDeflate:
		default:
			return fmt.Errorf("compression is %q or %q, not %q", "off", CompressionDeflate, value)
		}
		o.compressionSet = true
		return nil
	}
	return fmt.Errorf("unknown option %q (the keys file knows compression=off|deflate)", name)
}

// LoadFile reads and parses a keys file.
func LoadFile(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("codec: read the keys file: %w", err)
	}
	k, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return k, nil
}

// FromEnv loads the keys file TOLLGATE_CODEC_KEYS_FILE names. It returns
// nil and no error when the variable is unset: encryption is off.
func FromEnv(getenv func(string) string) (*Keyring, error) {
	path := getenv(EnvKeysFile)
	if path == "" {
		return nil, nil
	}
	k, err := LoadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvKeysFile, err)
	}
	return k, nil
}

// NewKey returns fresh random key material, for a new line of a keys
// file.
func NewKey(id string) (Key, error) {
	secret := make([]byte, KeySize)
	if _, err := rand.Read(secret); err != nil {
		return Key{}, fmt.Errorf("codec: generate a key: %w", err)
	}
	if !keyIDPattern.MatchString(id) {
		return Key{}, fmt.Errorf("codec: key id %q; an id is 1 to 64 letters, digits, '.', '_' or '-'", id)
	}
	return Key{ID: id, Secret: secret}, nil
}

// Line is the key as a keys file line.
func (k Key) Line() string { return k.ID + ":" + base64.StdEncoding.EncodeToString(k.Secret) }

// WithCompression is the keyring with compression before encryption on
// or off; k itself is unchanged. Decoding is the same either way.
func (k *Keyring) WithCompression(on bool) *Keyring {
	c := *k
	c.noCompress = !on
	return &c
}

// Compresses says whether the keyring compresses what it encrypts.
func (k *Keyring) Compresses() bool { return !k.noCompress }

// EncryptKeyID names the key new values are sealed with.
func (k *Keyring) EncryptKeyID() string { return k.encrypt }

// KeyIDs are every key id the keyring can decrypt, encrypt key first.
func (k *Keyring) KeyIDs() []string {
	ids := []string{k.encrypt}
	for id := range k.aeads {
		if id != k.encrypt {
			ids = append(ids, id)
		}
	}
	return ids
}

// DataConverter is Temporal's default data converter with this codec
// applied: set it as client.Options.DataConverter on every client and
// replayer that reads the same turns.
func (k *Keyring) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), k)
}

// Encode encrypts each payload whole (its metadata too, so the original
// encoding is private), compressing large ones first
// unless the keys file turned compression off.
func (k *Keyring) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: serialize payload %d: %w", i+1, err)
		}
		plain, compressed, err := k.maybeCompress(plain)
		if err != nil {
			return nil, err
		}
		md := map[string][]byte{
			MetadataEncoding: []byte(EncodingEncrypted),
			MetadataKeyID:    []byte(k.encrypt),
			MetadataCipher:   []byte(CipherAES256GCM),
		}
		if compressed {
			md[MetadataCompressed] = []byte(CompressionDeflate)
		}
		data, err := k.seal(plain, payloadAAD(k.encrypt, compressed))
		if err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{Metadata: md, Data: data}
	}
	return out, nil
}

// Decode decrypts the payloads Encode made and passes any other through
// unchanged, so histories from before encryption was turned on still
// read.
func (k *Keyring) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		md := p.GetMetadata()
		if string(md[MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		id := string(md[MetadataKeyID])
		if c, ok := md[MetadataCipher]; ok && string(c) != CipherAES256GCM {
			return nil, fmt.Errorf("codec: payload %d is encrypted with cipher %q; this codec knows only %s: %w", i+1, c, CipherAES256GCM, ErrCorrupt)
		}
		compressed := false
		switch c, ok := md[MetadataCompressed]; {
		case !ok:
		case string(c) == CompressionDeflate:
			compressed = true
		default:
			return nil, fmt.Errorf("codec: payload %d is compressed with %q, which this codec does not know: %w", i+1, c, ErrCorrupt)
		}
		plain, err := k.open("payload", id, p.GetData(), payloadAAD(id, compressed))
		if err != nil {
			return nil, fmt.Errorf("codec: %w (payload %d of %d)", err, i+1, len(payloads))
		}
		if compressed {
			if plain, err = decompress(plain); err != nil {
				return nil, fmt.Errorf("codec: %w (payload %d of %d)", err, i+1, len(payloads))
			}
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(plain, &dec); err != nil {
			return nil, fmt.Errorf("codec: payload %d decrypted but is not a payload: %v: %w", i+1, err, ErrCorrupt)
		}
		out[i] = &dec
	}
	return out, nil
}

// The sealed blob format: magic, key id length, key id, flags, then the
// nonce and the GCM ciphertext. The header up to the nonce is the
// additional authenticated data, so neither the key id nor the
// compression flag can be changed without Open noticing.
const (
	sealMagic      = "TGC1"
	flagCompressed = 1
)

// Seal encrypts a blob with the encrypt key into a self-describing value
// Open reads: the key id travels in its header.
func (k *Keyring) Seal(plaintext []byte) ([]byte, error) {
	plain, compressed, err := k.maybeCompress(plaintext)
	if err != nil {
		return nil, err
	}
	var flags byte
	if compressed {
		flags |= flagCompressed
	}
	header := make([]byte, 0, len(sealMagic)+2+len(k.encrypt))
	header = append(header, sealMagic...)
	header = append(header, byte(len(k.encrypt)))
	header = append(header, k.encrypt...)
	header = append(header, flags)
	body, err := k.seal(plain, header)
	if err != nil {
		return nil, err
	}
	return append(header, body...), nil
}

// Open decrypts what Seal made, with whichever key its header names.
func (k *Keyring) Open(sealed []byte) ([]byte, error) {
	if !IsSealed(sealed) {
		return nil, fmt.Errorf("codec: the value was not sealed by this codec (no %s header): %w", sealMagic, ErrCorrupt)
	}
	rest := sealed[len(sealMagic):]
	n := int(rest[0])
	if n == 0 || len(rest) < 1+n+1 {
		return nil, fmt.Errorf("codec: sealed value header is cut short: %w", ErrCorrupt)
	}
	id := string(rest[1 : 1+n])
	flags := rest[1+n]
	if flags&^flagCompressed != 0 {
		return nil, fmt.Errorf("codec: sealed value has unknown flags %#x: %w", flags, ErrCorrupt)
	}
	headerLen := len(sealMagic) + 1 + n + 1
	plain, err := k.open("value", id, sealed[headerLen:], sealed[:headerLen])
	if err != nil {
		return nil, fmt.Errorf("codec: %w", err)
	}
	if flags&flagCompressed != 0 {
		if plain, err = decompress(plain); err != nil {
			return nil, fmt.Errorf("codec: %w", err)
		}
	}
	return plain, nil
}

// IsSealed says whether b starts like a value Seal made, for stores that
// still hold values written before encryption was turned on.
func IsSealed(b []byte) bool {
	return len(b) > len(sealMagic) && string(b[:len(sealMagic)]) == sealMagic
}

func (k *Keyring) seal(plain, aad []byte) ([]byte, error) {
	aead := k.aeads[k.encrypt]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("codec: generate a nonce: %w", err)
	}
	return aead.Seal(nonce, nonce, plain, aad), nil
}

// open decrypts data; what names the thing in errors ("payload",
// "value").
func (k *Keyring) open(what, id string, data, aad []byte) ([]byte, error) {
	aead, ok := k.aeads[id]
	if !ok {
		if id == "" {
			return nil, fmt.Errorf("encrypted %s names no key: %w", what, ErrCorrupt)
		}
		return nil, fmt.Errorf("%s encrypted with key %q, which this process does not have (add it to the keys file %s names, as a decrypt-only line): %w", what, id, EnvKeysFile, ErrUnknownKey)
	}
	if len(data) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("encrypted %s is %d bytes, shorter than a nonce and tag: %w", what, len(data), ErrCorrupt)
	}
	nonce, body := data[:aead.NonceSize()], data[aead.NonceSize():]
	plain, err := aead.Open(make([]byte, 0, len(body)), nonce, body, aad)
	if err != nil {
		return nil, fmt.Errorf("cannot decrypt the %s with key %q: %w", what, id, ErrAuthentication)
	}
	return plain, nil
}

// payloadAAD binds a payload's key id and compression flag to its
// ciphertext.
func payloadAAD(id string, compressed bool) []byte {
	aad := []byte("tollgate-payload\x00" + id + "\x00")
	if compressed {
		aad = append(aad, CompressionDeflate...)
	}
	return aad
}

// maybeCompress deflates b when compression is on, b is large and the
// result is smaller.
func (k *Keyring) maybeCompress(b []byte) ([]byte, bool, error) {
	if k.noCompress || len(b) < CompressAbove {
		return b, false, nil
	}
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		return nil, false, fmt.Errorf("codec: compress: %w", err)
	}
	if _, err := w.Write(b); err != nil {
		return nil, false, fmt.Errorf("codec: compress: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, false, fmt.Errorf("codec: compress: %w", err)
	}
	if buf.Len() >= len(b) {
		return b, false, nil
	}
	return buf.Bytes(), true, nil
}

func decompress(b []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(b))
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, maxPlaintext+1))
	if err != nil {
		return nil, fmt.Errorf("decompress: %v: %w", err, ErrCorrupt)
	}
	if len(out) > maxPlaintext {
		return nil, fmt.Errorf("decompressed value exceeds %d bytes: %w", maxPlaintext, ErrCorrupt)
	}
	return out, nil
}
