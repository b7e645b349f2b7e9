// Package connections keeps the account connections tools act through: one
// credential per user and provider (an OAuth token, an API key). A tool
// that finds none returns results.NeedConnection; the turn waits until the
// person has connected, then the tool runs again and finds it here.
//
// Tokens are secrets: nothing in this package puts one in an error, and
// Credential prints with its token redacted.
package connections

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNotConnected is returned, wrapped, by Store.Get when the user has no
// connection to the provider.
var ErrNotConnected = errors.New("not connected")

// Credential is one user's connection to one provider.
type Credential struct {
	Provider  string    `json:"provider"`
	User      string    `json:"user"`
	Token     string    `json:"token"`
	Scopes    []string  `json:"scopes,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// RefreshToken, when set, lets the store's owner get a new Token once
	// Expiry passes (OAuth 2.0); empty for API keys and pasted tokens.
	RefreshToken string `json:"refresh_token,omitempty"`
	// TokenType is the OAuth token type ("Bearer"); empty means Bearer.
	TokenType string `json:"token_type,omitempty"`
	// Expiry is when Token stops working; zero means it does not expire.
	Expiry time.Time `json:"expiry,omitzero"`
}

// Expired reports whether the token is past its expiry at now, less a
// margin: a token that expires while the tool's request is in flight is
// as good as expired.
func (c Credential) Expired(now time.Time, margin time.Duration) bool {
	return !c.Expiry.IsZero() && !now.Add(margin).Before(c.Expiry)
}

// String keeps the token out of logs and error messages built with %v.
func (c Credential) String() string {
	return fmt.Sprintf("connection %s/%s (scopes %s, tokens redacted)", c.User, c.Provider, strings.Join(c.Scopes, ","))
}

// GoString keeps the token out of %#v too.
func (c Credential) GoString() string { return c.String() }

// Store holds credentials by user and provider. Implementations must be
// safe for concurrent use: tools of one step run in parallel.
type Store interface {
	// Get returns the credential, or an error wrapping ErrNotConnected.
	Get(ctx context.Context, user, provider string) (Credential, error)
	// Put adds or replaces the credential for its user and provider.
	Put(ctx context.Context, c Credential) error
	// Delete removes a credential; deleting an absent one is not an error.
	Delete(ctx context.Context, user, provider string) error
}

// Sealer encrypts credentials at rest. FileStore seals each file it
// writes and opens each it reads; the storage codec's AES-GCM keyring has
// this method set. Open must refuse (not pass through) data it did not
// seal, so a swapped file cannot be served.
type Sealer interface {
	Seal(plaintext []byte) ([]byte, error)
	Open(sealed []byte) ([]byte, error)
}

// ValidName reports whether s may be used as a user or provider name. The
// names become file names, so anything that could climb out of the store's
// directory or hide among its temp files is refused.
func ValidName(s string) error {
	switch {
	case s == "":
		return errors.New("name is empty")
	case len(s) > 200:
		return fmt.Errorf("name %.20q... is longer than 200 bytes", s)
	case strings.ContainsAny(s, "/\\\x00"):
		return fmt.Errorf("name %q contains a path separator or NUL", s)
	case strings.Contains(s, ".."):
		return fmt.Errorf("name %q contains '..'", s)
	case strings.HasPrefix(s, "."):
		return fmt.Errorf("name %q starts with '.'", s)
	}
	return nil
}

func validPair(user, provider string) error {
	if err := ValidName(user); err != nil {
		return fmt.Errorf("user: %w", err)
	}
	if err := ValidName(provider); err != nil {
		return fmt.Errorf("provider: %w", err)
	}
	return nil
}

func validCredential(c Credential) error {
	if err := validPair(c.User, c.Provider); err != nil {
		return err
	}
	if c.Token == "" {
		return fmt.Errorf("connection %s/%s has an empty token", c.User, c.Provider)
	}
	return nil
}

func notConnected(user, provider string) error {
	return fmt.Errorf("connections: user %q has no %s connection: %w", user, provider, ErrNotConnected)
}
