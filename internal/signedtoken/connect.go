package signedtoken

import (
	"fmt"
	"time"
)

// Two tokens carry a connection request around, with the same claims:
//
//   - a connect link (GET /v1/connect/{token}) names the waiting call, its
//     user and the provider; the gateway mints it when it shows a
//     waiting_connection card, and the call.waiting webhook carries one;
//   - the state parameter of the authorization request names the same
//     call and a fresh flow id; it lives minutes, and the gateway applies
//     each flow id once.

// ConnectClaims are what a connect link or an OAuth state says. Every
// field is signed.
type ConnectClaims struct {
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
func (c ConnectClaims) UpdateID() string { return "oauth-" + c.ID }

func (c ConnectClaims) check(p purpose) error {
	err := checkClaims(c.ID, c.Expires,
		field{"turn", c.Turn}, field{"call", c.Call}, field{"user", c.User}, field{"provider", c.Provider})
	if err != nil {
		return fmt.Errorf("%s %w", p.a(), err)
	}
	return nil
}

// SignConnect returns the token of a connect link for c; an empty ID is
// filled.
func (s *Signer) SignConnect(c ConnectClaims) (string, error) {
	return s.signConnect(connectPurpose, c)
}

// VerifyConnect checks token as a connect link: its signature first
// (nothing of a forged token is read), then its expiry against now.
// Failures wrap ErrTampered or ErrExpired.
func (s *Signer) VerifyConnect(token string, now time.Time) (ConnectClaims, error) {
	return s.verifyConnect(connectPurpose, token, now)
}

// SignState returns the OAuth state of the flow c.ID names; an empty ID
// is filled.
func (s *Signer) SignState(c ConnectClaims) (string, error) { return s.signConnect(statePurpose, c) }

// VerifyState checks token as an OAuth state, as VerifyConnect checks a
// connect link.
func (s *Signer) VerifyState(token string, now time.Time) (ConnectClaims, error) {
	return s.verifyConnect(statePurpose, token, now)
}

// VerifierMAC binds the PKCE verifier of the flow flowID to the cookie
// that carries it, so the callback knows this gateway set it.
func (s *Signer) VerifierMAC(flowID, verifier string) []byte {
	return s.mac(verifierLabel, flowID, verifier)
}

func (s *Signer) signConnect(p purpose, c ConnectClaims) (string, error) {
	c.ID, c.Expires = stamp(c.ID, c.Expires)
	if err := c.check(p); err != nil {
		return "", err
	}
	return s.seal(p, c)
}

func (s *Signer) verifyConnect(p purpose, token string, now time.Time) (ConnectClaims, error) {
	var c ConnectClaims
	if err := s.open(p, token, &c); err != nil {
		return ConnectClaims{}, tampered(p, err)
	}
	if err := verified(p, c.check(p), c.Expires, now); err != nil {
		return ConnectClaims{}, err
	}
	return c, nil
}
