package oauth

import (
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/tollgate/internal/signedtoken"
)

// Two signed tokens carry a connection request around:
//
//   - a connect link (GET /v1/connect/{token}) names the waiting call, its
//     user and the provider; the gateway mints it when it shows a
//     waiting_connection card, and the call.waiting webhook carries one;
//   - the state parameter of the authorization request names the same
//     call and a fresh flow id; it lives minutes, and the gateway applies
//     each flow id once.
//
// Both are internal/signedtoken tokens, as the one-click links of
// gateway/links are, under the link secret and a label per kind, so a
// connect link is never a valid state or a decision link, nor the other
// way round.

// Sentinel errors of Verify.
var (
	ErrTampered = errors.New("the token is not valid: it was altered or is not Tollgate's")
	ErrExpired  = errors.New("the token has expired")
)

// Kinds of token.
const (
	KindConnect = "connect"
	KindState   = "state"
)

// Claims are what a connect link or a state says. Every field is signed.
type Claims struct {
	Turn     string    `json:"t"`
	Call     string    `json:"c"`
	User     string    `json:"u"`
	Provider string    `json:"p"`
	Expires  time.Time `json:"e"`
	// ID is random (16 bytes, base64url). A state's ID names the flow:
	// its PKCE cookie and the Update id of its `connected`.
	ID string `json:"i"`
}

// UpdateID is the Update id the `connected` of a state's flow is sent
// with: a reloaded callback sends the same Update, which applies once.
func (c Claims) UpdateID() string { return "oauth-" + c.ID }

func (c Claims) validate() error {
	return signedtoken.CheckClaims(c.ID, c.Expires,
		signedtoken.Field{Name: "turn", Value: c.Turn}, signedtoken.Field{Name: "call", Value: c.Call},
		signedtoken.Field{Name: "user", Value: c.User}, signedtoken.Field{Name: "provider", Value: c.Provider})
}

// Signer signs with its first secret and verifies with all, so the link
// secret can be rotated as gateway/links allows.
type Signer struct {
	keys *signedtoken.Keys
}

// NewSigner takes one or more secrets of at least 32 bytes (the link
// secret: TOLLGATE_LINK_SECRET_FILE).
func NewSigner(secrets ...[]byte) (*Signer, error) {
	keys, err := signedtoken.NewKeys(secrets...)
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	return &Signer{keys: keys}, nil
}

// NewID returns a fresh random id: 16 bytes, base64url.
func NewID() string { return signedtoken.NewID() }

// Sign returns the token of kind for c; an empty ID is filled.
func (s *Signer) Sign(kind string, c Claims) (string, error) {
	if c.ID == "" {
		c.ID = NewID()
	}
	c.Expires = c.Expires.UTC().Round(0)
	if err := c.validate(); err != nil {
		return "", fmt.Errorf("oauth: a %s token %w", kind, err)
	}
	tok, err := s.keys.Seal(label(kind), c)
	if err != nil {
		return "", fmt.Errorf("oauth: the %s token: %w", kind, err)
	}
	return tok, nil
}

// Verify checks token as a token of kind: its signature first (nothing
// of a forged token is read), then its expiry against now. Failures wrap
// ErrTampered or ErrExpired.
func (s *Signer) Verify(kind, token string, now time.Time) (Claims, error) {
	var c Claims
	if err := s.keys.Open(label(kind), token, &c); err != nil {
		return Claims{}, fmt.Errorf("%w (%v)", ErrTampered, err)
	}
	if err := c.validate(); err != nil {
		return Claims{}, fmt.Errorf("%w (%v)", ErrTampered, err)
	}
	if !now.Before(c.Expires) {
		return Claims{}, fmt.Errorf("%w (at %s)", ErrExpired, c.Expires.Format(time.RFC3339))
	}
	return c, nil
}

// MAC is a keyed hash of parts under the first secret with label, for the
// values the flow binds to a browser (the PKCE cookie).
func (s *Signer) MAC(label string, parts ...string) []byte {
	return s.keys.MAC("tollgate oauth "+label+"\x00", parts...)
}

// label separates each kind's MACs from the others' and from links'.
func label(kind string) string { return "tollgate oauth " + kind + " v1\x00" }
