// Package signedtoken is the envelope of Tollgate's signed URL tokens
// (one-click decision links, OAuth connect links and states):
// <payload>.<mac>, both base64url without padding, where the payload is
// the JSON of the caller's claims and the mac is HMAC-SHA256 over a label
// and the encoded payload. The label keeps one secret's uses apart: a
// token signed under one label never verifies under another.
//
// What the claims mean, which are required, and when they expire is the
// caller's; this package only seals and opens them.
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
	"strings"
	"time"
	"unicode/utf8"
)

const (
	// MinSecretLen is the shortest secret accepted: HMAC-SHA256 gains
	// nothing from more than its 32-byte block of entropy, and less makes
	// the key guessable offline from any one token.
	MinSecretLen = 32
	// MaxTokenLen bounds the tokens Open looks at, so a hostile URL costs
	// nothing to refuse, and the tokens Seal makes.
	MaxTokenLen = 2048
	// MaxFieldLen bounds each string claim, which keeps tokens well under
	// MaxTokenLen.
	MaxFieldLen = 256
)

// Keys sign with the first secret and verify with all of them, so a
// secret can be rotated: put the new one first and keep the old one until
// the tokens it signed have expired.
type Keys struct {
	secrets [][]byte
}

// NewKeys takes one or more secrets of at least MinSecretLen bytes.
func NewKeys(secrets ...[]byte) (*Keys, error) {
	if len(secrets) == 0 {
		return nil, errors.New("at least one secret is needed")
	}
	k := &Keys{}
	for i, s := range secrets {
		if len(s) < MinSecretLen {
			return nil, fmt.Errorf("secret %d is %d bytes; at least %d are needed", i+1, len(s), MinSecretLen)
		}
		k.secrets = append(k.secrets, bytes.Clone(s))
	}
	return k, nil
}

// NewID returns a fresh random id: 16 bytes, base64url.
func NewID() string {
	b := make([]byte, 16)
	// crypto/rand.Read never fails on supported platforms (Go 1.24+).
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Seal encodes claims as JSON and signs them under label.
func (k *Keys) Seal(label string, claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encode claims: %w", err)
	}
	p := base64.RawURLEncoding.EncodeToString(payload)
	token := p + "." + base64.RawURLEncoding.EncodeToString(mac(k.secrets[0], label, p))
	if len(token) > MaxTokenLen {
		return "", fmt.Errorf("the token would be %d bytes, over %d", len(token), MaxTokenLen)
	}
	return token, nil
}

// Open checks token's signature under label against every secret and
// only then decodes its payload into claims, refusing unknown fields. Its
// error says in a few words what was wrong; a caller wraps it in its own
// "not valid" sentinel and trusts nothing of a token that failed.
func (k *Keys) Open(label, token string, claims any) error {
	if len(token) > MaxTokenLen {
		return errors.New("token too long")
	}
	p, sig, ok := strings.Cut(token, ".")
	if !ok || p == "" || sig == "" {
		return errors.New("malformed token")
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return errors.New("malformed signature")
	}
	match := false
	for _, s := range k.secrets {
		// hmac.Equal takes the same time wherever the first difference is;
		// every secret is tried so timing does not tell which one matched.
		if hmac.Equal(got, mac(s, label, p)) {
			match = true
		}
	}
	if !match {
		return errors.New("signature mismatch")
	}
	// Only an authentic payload is decoded. One we signed that does not
	// decode means a signer bug or a leaked key: refused the same way.
	payload, err := base64.RawURLEncoding.DecodeString(p)
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

// MAC is HMAC-SHA256 under the signing secret of label and then each
// part, each part ended by a zero byte so that parts cannot run together:
// for values bound to a browser rather than carried in a token.
func (k *Keys) MAC(label string, parts ...string) []byte {
	h := hmac.New(sha256.New, k.secrets[0])
	h.Write([]byte(label))
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

func mac(secret []byte, label, payload string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	h.Write([]byte(payload))
	return h.Sum(nil)
}

// Field is one string claim, named as an error names it.
type Field struct {
	Name, Value string
}

// CheckClaims says in words what makes claims unfit to sign, or, in a
// token that verified, to trust: a string claim that is empty, longer than
// MaxFieldLen or not UTF-8, an id of other than base64url characters (it
// becomes part of an Update id), or no expiry. The id is checked as a
// field too. Its sentence reads after "a link" or "a connect token".
func CheckClaims(id string, expires time.Time, fields ...Field) error {
	for _, f := range append(fields, Field{"id", id}) {
		if f.Value == "" {
			return fmt.Errorf("needs %s %s", article(f.Name), f.Name)
		}
		if len(f.Value) > MaxFieldLen || !utf8.ValidString(f.Value) {
			return fmt.Errorf("has %s %s that is not valid UTF-8 of at most %d bytes", article(f.Name), f.Name, MaxFieldLen)
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

func article(name string) string {
	if strings.ContainsRune("aeiou", rune(name[0])) {
		return "an"
	}
	return "a"
}
