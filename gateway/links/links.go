// Package links signs and verifies the tokens of one-click decision links:
// a URL that approves or denies one waiting call, sent by email or chat.
//
// A token is an internal/signedtoken token: <payload>.<mac>, the payload
// the JSON of Claims, the mac HMAC-SHA256 over the link label and the
// payload. A token only says what its signer meant; the gateway still
// checks that the call waits, that its arguments hash to ArgsHash and that
// the turn is still the execution chain Run names, and derives the Update
// id from the token's ID so a link applies at most once.
package links

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/results"
)

// Sentinel errors of Verify; match them with errors.Is.
var (
	// ErrTampered: the token is malformed, too long, or its signature does
	// not match any key. Its claims must not be trusted.
	ErrTampered = errors.New("the link is not valid: it was altered or is not a Tollgate link")
	// ErrExpired: the token is authentic but its expiry has passed.
	ErrExpired = errors.New("the link has expired")
	// ErrUnbound: the token is authentic but names no run. Links made
	// before they named their run are refused: such a link would decide
	// for whatever turn holds its turn id when it is pressed.
	ErrUnbound = errors.New("the link was made by an older Tollgate and names no run of its turn")
)

const (
	// MinSecretLen is the shortest secret accepted.
	MinSecretLen = signedtoken.MinSecretLen
	// MaxTokenLen bounds the tokens Verify looks at and Sign makes.
	MaxTokenLen = signedtoken.MaxTokenLen
	// maxSecretFile bounds what LoadSecret reads.
	maxSecretFile = 4096
)

// macLabel separates link MACs from any other use of the same secret.
const macLabel = "tollgate link v1\x00"

// Claims are what one link decides. Every field is signed.
type Claims struct {
	Turn string `json:"t"`
	// Run is a run id of the turn's execution when the link was made (the
	// run that emitted the event). A turn id can name another execution
	// later (closed turns' ids can be taken again, by the Go API or a
	// rerun key, or once retention forgets them); the gateway applies a
	// link only while the turn's current run belongs to the same chain of
	// runs as Run, so a continue-as-new keeps it working and a new turn
	// under the old id does not. Tokens from before it have none and are
	// refused (ErrUnbound).
	Run      string               `json:"r,omitempty"`
	Call     string               `json:"c"`
	Decision results.DecisionKind `json:"d"` // approve or deny only
	// ArgsHash binds the link to the call's arguments when it was made:
	// ArgsHash(card.EffectiveArguments()).
	ArgsHash string `json:"h"`
	// By is the principal the decision is recorded as (e.g. "webhook",
	// "email:ops@example.com").
	By      string    `json:"b"`
	Expires time.Time `json:"e"`
	// ID is random (16 bytes, base64url); the gateway derives the Update
	// id from it so a link applies at most once.
	ID string `json:"i"`
}

// UpdateID is the Temporal Update id a link's decision is sent with: a
// second use of the same link is the same Update, which applies once.
func (c Claims) UpdateID() string { return "link-" + c.ID }

// validate says in a sentence what makes c unfit to sign.
func (c Claims) validate() error {
	err := signedtoken.CheckClaims(c.ID, c.Expires,
		signedtoken.Field{Name: "turn", Value: c.Turn}, signedtoken.Field{Name: "call", Value: c.Call},
		signedtoken.Field{Name: "arguments hash", Value: c.ArgsHash}, signedtoken.Field{Name: "principal (by)", Value: c.By})
	if err != nil {
		return fmt.Errorf("a link %w", err)
	}
	if c.Decision != results.DecisionApprove && c.Decision != results.DecisionDeny {
		return fmt.Errorf("a link can only approve or deny, not %q", c.Decision)
	}
	// Last, so Verify can tell an old token (all else fine) from a bad one.
	if c.Run == "" {
		return errNoRun
	}
	if err := signedtoken.CheckClaims(c.ID, c.Expires, signedtoken.Field{Name: "run", Value: c.Run}); err != nil {
		return fmt.Errorf("a link %w", err)
	}
	return nil
}

var errNoRun = errors.New("a link needs a run: the run id of the turn's execution it decides for")

// Signer signs with its first key and verifies with all of them, so a
// secret can be rotated: put the new one first and keep the old one until
// the links it signed have expired.
type Signer struct {
	keys *signedtoken.Keys
}

// NewSigner takes one or more secrets of at least MinSecretLen bytes; the
// first signs, all verify.
func NewSigner(secrets ...[]byte) (*Signer, error) {
	keys, err := signedtoken.NewKeys(secrets...)
	if err != nil {
		return nil, fmt.Errorf("links: %w", err)
	}
	return &Signer{keys: keys}, nil
}

// NewID returns a fresh random link id: 16 bytes, base64url.
func NewID() string { return signedtoken.NewID() }

// Sign returns the token for c. An empty ID is filled with NewID; claims
// that no link should carry are refused with a sentence.
func (s *Signer) Sign(c Claims) (string, error) {
	if c.ID == "" {
		c.ID = NewID()
	}
	// Times travel as RFC 3339 in UTC; dropping the monotonic clock and
	// the location keeps the token short and Verify's answer equal to c.
	c.Expires = c.Expires.UTC().Round(0)
	if err := c.validate(); err != nil {
		return "", fmt.Errorf("links: %w", err)
	}
	token, err := s.keys.Seal(macLabel, c)
	if err != nil {
		return "", fmt.Errorf("links: %w", err)
	}
	return token, nil
}

// Verify checks token's signature against every key and its expiry
// against now, and returns its claims. Failures wrap ErrTampered,
// ErrUnbound or ErrExpired; claims are returned only when every check
// passes.
func (s *Signer) Verify(token string, now time.Time) (Claims, error) {
	var c Claims
	if err := s.keys.Open(macLabel, token, &c); err != nil {
		return Claims{}, fmt.Errorf("%w (%v)", ErrTampered, err)
	}
	// An authentic token whose claims do not validate means a signer bug
	// or a leaked key: refused as tampered.
	if err := c.validate(); errors.Is(err, errNoRun) {
		return Claims{}, ErrUnbound
	} else if err != nil {
		return Claims{}, fmt.Errorf("%w (%v)", ErrTampered, err)
	}
	if !now.Before(c.Expires) {
		return Claims{}, fmt.Errorf("%w (at %s)", ErrExpired, c.Expires.Format(time.RFC3339))
	}
	return c, nil
}

// ArgsHash is the base64url SHA-256 of args in compact JSON
// (results.CompactJSON), so the same arguments hash alike however they
// were spaced; key order still matters, as it does to the tool.
func ArgsHash(args json.RawMessage) string {
	sum := sha256.Sum256(results.CompactJSON(args))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// LoadSecret reads a link secret from path (TOLLGATE_LINK_SECRET_FILE).
// The file holds either base64 (standard or URL alphabet, padded or not)
// that decodes to at least MinSecretLen bytes, or at least MinSecretLen
// bytes used as they are; surrounding white space, such as the newline
// an editor adds, is ignored. Generate one with
// `head -c 32 /dev/urandom | base64 > link.secret`.
func LoadSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("links: reading the secret file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("links: reading the secret file %s: %w", path, err)
	}
	if len(data) > maxSecretFile {
		return nil, fmt.Errorf("links: the secret file %s is over %d bytes; it should hold one secret", path, maxSecretFile)
	}
	text := bytes.TrimSpace(data)
	if k, ok := decodeBase64(text); ok && len(k) >= MinSecretLen {
		return k, nil
	}
	if len(text) < MinSecretLen {
		return nil, fmt.Errorf("links: the secret in %s is %d bytes; at least %d are needed (for example 32 random bytes in base64)", path, len(text), MinSecretLen)
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
