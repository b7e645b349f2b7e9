// Package signedtoken signs and verifies Tollgate's signed URL tokens:
// one-click decision links, OAuth connect links and OAuth states. One
// Signer, made from the link secret (TOLLGATE_LINK_SECRET_FILE), handles
// all of them.
//
// A token is <payload>.<mac>, both base64url without padding, where the
// payload is the JSON of the token's claims and the mac is HMAC-SHA256
// over its purpose's label and the encoded payload. The label keeps the
// secret's uses apart: a token signed for one purpose never verifies for
// another, so a connect link is never a decision link or a state.
//
// A token only says what its signer meant: the gateway still checks that
// what it names is there and still waits.
package signedtoken

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	// MinSecretLen is the shortest secret accepted: HMAC-SHA256 gains
	// nothing from more than its 32-byte block of entropy, and less makes
	// the key guessable offline from any one token.
	MinSecretLen = 32
	// MaxTokenLen bounds the tokens Verify looks at, so a hostile URL
	// costs nothing to refuse, and the tokens Sign makes.
	MaxTokenLen = 2048
	// MaxFieldLen bounds each string claim, which keeps tokens well under
	// MaxTokenLen.
	MaxFieldLen = 256
	// maxSecretFile bounds what LoadSecret reads.
	maxSecretFile = 4096
)

// Sentinel errors of the Verify methods; match them with errors.Is.
var (
	// ErrTampered: the token is malformed, too long, signed for another
	// purpose, or its signature matches no secret. Its claims must not be
	// trusted.
	ErrTampered = errors.New("the token is not valid: it was altered or is not Tollgate's")
	// ErrExpired: the token is authentic but its expiry has passed.
	ErrExpired = errors.New("the token has expired")
	// ErrUnbound: a link that is authentic but names no run. Links made
	// before they named their run are refused: such a link would decide
	// for whatever turn holds its turn id when it is pressed.
	ErrUnbound = errors.New("the link was made by an older Tollgate and names no run of its turn")
)

// purpose is one format of token. Its label goes into every MAC, and is
// fixed: changing it revokes every token of the purpose already sent.
type purpose struct {
	name, label string
}

var (
	linkPurpose    = purpose{"link", "tollgate link v1\x00"}
	connectPurpose = purpose{"connect link", "tollgate oauth connect v1\x00"}
	statePurpose   = purpose{"OAuth state", "tollgate oauth state v1\x00"}
)

// verifierLabel is VerifierMAC's, fixed like the purposes' labels so a
// sign-in under way across a deployment still completes.
const verifierLabel = "tollgate oauth pkce\x00"

// a is p's name as a sentence about it begins: "a link", "an OAuth state".
func (p purpose) a() string { return article(p.name) + " " + p.name }

// Signer signs with its first secret and verifies with all of them, so
// the secret can be rotated: put the new one first and keep the old one
// until the tokens it signed have expired.
type Signer struct {
	secrets [][]byte
}

// NewSigner takes one or more secrets of at least MinSecretLen bytes; the
// first signs, all verify.
func NewSigner(secrets ...[]byte) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("at least one secret is needed")
	}
	s := &Signer{}
	for i, secret := range secrets {
		if len(secret) < MinSecretLen {
			return nil, fmt.Errorf("secret %d is %d bytes; at least %d are needed", i+1, len(secret), MinSecretLen)
		}
		// A copy: a caller reusing its buffer does not change the key.
		s.secrets = append(s.secrets, bytes.Clone(secret))
	}
	return s, nil
}

// NewID returns a fresh random id: 16 bytes, base64url.
func NewID() string {
	b := make([]byte, 16)
	// crypto/rand.Read never fails on supported platforms (Go 1.24+).
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// seal encodes claims as JSON and signs them for p.
func (s *Signer) seal(p purpose, claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encode the claims of %s: %w", p.a(), err)
	}
	token := s.sealRaw(p, payload)
	if len(token) > MaxTokenLen {
		return "", fmt.Errorf("%s would be %d bytes, over %d", p.a(), len(token), MaxTokenLen)
	}
	return token, nil
}

func (s *Signer) sealRaw(p purpose, payload []byte) string {
	enc := base64.RawURLEncoding.EncodeToString(payload)
	return enc + "." + base64.RawURLEncoding.EncodeToString(tokenMAC(s.secrets[0], p, enc))
}

// open checks token's signature for p against every secret and only then
// decodes its payload into claims, refusing unknown fields. Its error
// says in a few words what was wrong; callers wrap it in ErrTampered.
func (s *Signer) open(p purpose, token string, claims any) error {
	if len(token) > MaxTokenLen {
		return errors.New("token too long")
	}
	enc, sig, ok := strings.Cut(token, ".")
	if !ok || enc == "" || sig == "" {
		return errors.New("malformed token")
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return errors.New("malformed signature")
	}
	match := false
	for _, secret := range s.secrets {
		// hmac.Equal takes the same time wherever the first difference is;
		// every secret is tried so timing does not tell which one matched.
		if hmac.Equal(got, tokenMAC(secret, p, enc)) {
			match = true
		}
	}
	if !match {
		return errors.New("signature mismatch")
	}
	// Only an authentic payload is decoded. One we signed that does not
	// decode means a signer bug or a leaked key: refused the same way.
	payload, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return errors.New("malformed payload")
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(claims); err != nil || dec.More() {
		return errors.New("unreadable claims")
	}
	return nil
}

func tokenMAC(secret []byte, p purpose, payload string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(p.label))
	h.Write([]byte(payload))
	return h.Sum(nil)
}

// mac is HMAC-SHA256 under the signing secret of label and then each
// part, each part ended by a zero byte so that parts cannot run together:
// for values bound to a browser rather than carried in a token.
func (s *Signer) mac(label string, parts ...string) []byte {
	h := hmac.New(sha256.New, s.secrets[0])
	h.Write([]byte(label))
	for _, part := range parts {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// stamp fills an empty id and drops expires' location and monotonic
// clock: times travel as RFC 3339 in UTC, so the token stays short and
// what Verify returns equals what was signed.
func stamp(id string, expires time.Time) (string, time.Time) {
	if id == "" {
		id = NewID()
	}
	return id, expires.UTC().Round(0)
}

// verified is what every Verify method does once a token has opened:
// claims the signer would have refused (invalid) mean a signer bug or a
// leaked key and are refused as tampered; then the expiry is checked.
func verified(p purpose, invalid error, expires, now time.Time) error {
	if invalid != nil {
		return tampered(p, invalid)
	}
	if !now.Before(expires) {
		return fmt.Errorf("%s: %w (at %s)", p.name, ErrExpired, expires.Format(time.RFC3339))
	}
	return nil
}

func tampered(p purpose, why error) error {
	return fmt.Errorf("%s: %w (%v)", p.name, ErrTampered, why)
}

// field is one string claim, named as an error names it.
type field struct {
	name, value string
}

// checkClaims says in words what makes claims unfit to sign, or, in a
// token that verified, to trust: a string claim that is empty, longer
// than MaxFieldLen or not UTF-8, an id of other than base64url characters
// (it becomes part of an Update id), or no expiry. The id is checked as a
// field too. Its sentence reads after the token's name: "a link needs a
// turn".
func checkClaims(id string, expires time.Time, fields ...field) error {
	for _, f := range append(fields, field{"id", id}) {
		if f.value == "" {
			return fmt.Errorf("needs %s %s", article(f.name), f.name)
		}
		if len(f.value) > MaxFieldLen || !utf8.ValidString(f.value) {
			return fmt.Errorf("has %s %s that is not valid UTF-8 of at most %d bytes", article(f.name), f.name, MaxFieldLen)
		}
	}
	if strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return errors.New("has an id that is not base64url characters only")
	}
	if expires.IsZero() {
		return errors.New("needs an expiry")
	}
	return nil
}

// article is "an" before a vowel sound; no 'u' here is one ("a user").
func article(name string) string {
	if strings.ContainsRune("aeioAEIO", rune(name[0])) {
		return "an"
	}
	return "a"
}

// LoadSecret reads the link secret from path (TOLLGATE_LINK_SECRET_FILE;
// the gateway's session secret has the same form). The file holds either
// base64 (standard or URL alphabet, padded or not) that decodes to at
// least MinSecretLen bytes, or at least MinSecretLen bytes used as they
// are; surrounding white space, such as the newline an editor adds, is
// ignored. Generate one with `head -c 32 /dev/urandom | base64 > link.secret`.
func LoadSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the secret file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading the secret file %s: %w", path, err)
	}
	if len(data) > maxSecretFile {
		return nil, fmt.Errorf("the secret file %s is over %d bytes; it should hold one secret", path, maxSecretFile)
	}
	text := bytes.TrimSpace(data)
	if k, ok := decodeBase64(text); ok && len(k) >= MinSecretLen {
		return k, nil
	}
	if len(text) < MinSecretLen {
		return nil, fmt.Errorf("the secret in %s is %d bytes; at least %d are needed (for example 32 random bytes in base64)", path, len(text), MinSecretLen)
	}
	return bytes.Clone(text), nil
}

func decodeBase64(text []byte) ([]byte, bool) {
	s := string(text)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			return k, true
		}
	}
	return nil, false
}
