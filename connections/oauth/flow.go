package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/tollgate-dev/tollgate/connections"
)

// ErrRefused is a provider's refusal (an OAuth error answer such as
// invalid_grant): the grant is gone, and asking again will not help.
// Other failures (network, 5xx) may pass.
var ErrRefused = errors.New("the provider refused")

// NewVerifier returns a fresh PKCE code verifier (32 random bytes).
func NewVerifier() string { return oauth2.GenerateVerifier() }

// AuthCodeURL is where the browser goes to consent: the authorization
// code flow with the S256 challenge of verifier and state.
func (p *Provider) AuthCodeURL(state, verifier string) string {
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	if p.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", p.resource))
	}
	return p.config.AuthCodeURL(state, opts...)
}

// Exchange trades an authorization code (and the PKCE verifier it was
// asked for with) for a credential of user.
func (p *Provider) Exchange(ctx context.Context, user, code, verifier string) (connections.Credential, error) {
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(verifier)}
	if p.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", p.resource))
	}
	tok, err := p.config.Exchange(p.ctx(ctx), code, opts...)
	if err != nil {
		return connections.Credential{}, describe("exchange the code", err)
	}
	return p.credential(user, tok, ""), nil
}

// Refresh gets a new access token for c with its refresh token. A
// provider that sends no new refresh token leaves the old one in use.
func (p *Provider) Refresh(ctx context.Context, c connections.Credential) (connections.Credential, error) {
	if c.RefreshToken == "" {
		return connections.Credential{}, fmt.Errorf("refresh the %s token of %s: it has no refresh token: %w", p.ID, c.User, ErrRefused)
	}
	src := p.config.TokenSource(p.ctx(ctx), &oauth2.Token{RefreshToken: c.RefreshToken, Expiry: time.Unix(1, 0)})
	tok, err := src.Token()
	if err != nil {
		return connections.Credential{}, describe("refresh the token", err)
	}
	out := p.credential(c.User, tok, c.RefreshToken)
	if len(out.Scopes) == 0 {
		out.Scopes = c.Scopes
	}
	return out, nil
}

// Revoke asks the provider to revoke token (RFC 7009; a refresh token
// revokes its grant). Without a revocation endpoint it does nothing.
func (p *Provider) Revoke(ctx context.Context, token, hint string) error {
	if p.RevokeURL == "" || token == "" {
		return nil
	}
	form := url.Values{"token": {token}}
	if hint != "" {
		form.Set("token_type_hint", hint)
	}
	if p.config.ClientSecret == "" {
		form.Set("client_id", p.config.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.RevokeURL, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("revoke at %s: %w", p.ID, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if p.config.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(p.config.ClientID), url.QueryEscape(p.config.ClientSecret))
	}
	resp, err := p.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("revoke at %s: %w", p.ID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("revoke at %s: the provider answered %s", p.ID, resp.Status)
	}
	return nil
}

func (p *Provider) ctx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, p.client)
}

func (p *Provider) credential(user string, tok *oauth2.Token, oldRefresh string) connections.Credential {
	c := connections.Credential{
		Provider:     p.ID,
		User:         user,
		Token:        tok.AccessToken,
		RefreshToken: tok.RefreshToken,
		TokenType:    tok.TokenType,
		Expiry:       tok.Expiry.UTC(),
		CreatedAt:    time.Now().UTC(),
	}
	if c.RefreshToken == "" {
		c.RefreshToken = oldRefresh
	}
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		c.Scopes = strings.Fields(s)
	} else {
		c.Scopes = p.Scopes()
	}
	return c
}

// describe says what failed without the response body, which
// oauth2.RetrieveError quotes and which may hold anything the provider
// echoed. An OAuth error answer wraps ErrRefused.
func describe(doing string, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := re.ErrorCode
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		if code != "" || (status >= 400 && status < 500) {
			if code == "" {
				code = fmt.Sprintf("HTTP %d", status)
			}
			return fmt.Errorf("%s: %w (%s)", doing, ErrRefused, code)
		}
		return fmt.Errorf("%s: the provider answered HTTP %d", doing, status)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", doing, ue.Err)
	}
	return fmt.Errorf("%s: %w", doing, err)
}
