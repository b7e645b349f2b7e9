package oauth_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/connections/oauth/oauthtest"
)

const redirect = "http://127.0.0.1:1/v1/oauth/callback"

func provider(t *testing.T, idp *oauthtest.Server, useDiscovery bool) *oauth.Provider {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "s")
	require.NoError(t, os.WriteFile(secret, []byte(idp.ClientSecret()), 0o600))
	pc := oauth.ProviderConfig{ID: "github", ClientID: idp.ClientID(), ClientSecretFile: secret, Scopes: []string{"repo"}}
	if useDiscovery {
		pc.Issuer = idp.URL
	} else {
		pc.AuthURL, pc.TokenURL = idp.AuthURL(), idp.TokenURL()
	}
	ps, err := oauth.New(context.Background(), oauth.Config{RedirectBase: "http://127.0.0.1:1", Providers: []oauth.ProviderConfig{pc}}, oauth.LoadOptions{})
	require.NoError(t, err)
	p, ok := ps.Get("github")
	require.True(t, ok)
	return p
}

// code consents on the test provider and returns the authorization code.
func code(t *testing.T, p *oauth.Provider, idp *oauthtest.Server, verifier string) string {
	t.Helper()
	u, err := url.Parse(p.AuthCodeURL("state-1234567890", verifier))
	require.NoError(t, err)
	form := u.Query()
	form.Set("consent", "allow")
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(idp.AuthURL(), form)
	require.NoError(t, err)
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "state-1234567890", loc.Query().Get("state"))
	require.NotEmpty(t, loc.Query().Get("code"), loc.String())
	return loc.Query().Get("code")
}

func TestPKCERefusesAnotherVerifier(t *testing.T) {
	idp, err := oauthtest.Start(oauthtest.Options{RedirectURIs: []string{redirect}})
	require.NoError(t, err)
	defer idp.Close()
	p := provider(t, idp, true)
	ctx := context.Background()

	v := oauth.NewVerifier()
	_, err = p.Exchange(ctx, "alice", code(t, p, idp, v), oauth.NewVerifier())
	require.ErrorIs(t, err, oauth.ErrRefused, "a code stolen without its verifier is worth nothing")

	c := code(t, p, idp, v)
	cred, err := p.Exchange(ctx, "alice", c, v)
	require.NoError(t, err)
	require.True(t, idp.Active(ctx, cred.Token))
	require.NotEmpty(t, cred.RefreshToken)
	require.Equal(t, "alice", cred.User)
	require.WithinDuration(t, time.Now().Add(time.Hour), cred.Expiry, time.Minute)
	fresh, err := p.Refresh(ctx, cred)
	require.NoError(t, err)
	require.NotEqual(t, cred.Token, fresh.Token)
	require.True(t, idp.Active(ctx, fresh.Token))

	// A replayed code is refused, and the provider revokes what it gave.
	_, err = p.Exchange(ctx, "alice", c, v)
	require.ErrorIs(t, err, oauth.ErrRefused, "a code works once")
	require.NotContains(t, err.Error(), cred.Token)
	require.False(t, idp.Active(ctx, fresh.Token))
}

func TestConfigRefusals(t *testing.T) {
	idp, err := oauthtest.Start(oauthtest.Options{RedirectURIs: []string{redirect}})
	require.NoError(t, err)
	defer idp.Close()
	ctx := context.Background()
	for name, tc := range map[string]struct {
		cfg  oauth.Config
		want string
	}{
		"no redirect base": {oauth.Config{Providers: []oauth.ProviderConfig{{ID: "g", ClientID: "c", AuthURL: idp.AuthURL(), TokenURL: idp.TokenURL()}}}, "redirect_base is empty"},
		"no token url":     {oauth.Config{RedirectBase: "http://x", Providers: []oauth.ProviderConfig{{ID: "g", ClientID: "c", AuthURL: idp.AuthURL()}}}, "token_url"},
		"bad id":           {oauth.Config{RedirectBase: "http://x", Providers: []oauth.ProviderConfig{{ID: "../g", ClientID: "c"}}}, "id:"},
		"issuer mismatch":  {oauth.Config{RedirectBase: "http://x", Providers: []oauth.ProviderConfig{{ID: "g", ClientID: "c", Issuer: idp.URL + "/other"}}}, "discovery"},
		"missing secret":   {oauth.Config{RedirectBase: "http://x", Providers: []oauth.ProviderConfig{{ID: "g", ClientID: "c", AuthURL: idp.AuthURL(), TokenURL: idp.TokenURL(), ClientSecretFile: "/nonexistent/secret"}}}, "client secret"},
		"twice": {oauth.Config{RedirectBase: "http://x", Providers: []oauth.ProviderConfig{
			{ID: "g", ClientID: "c", AuthURL: idp.AuthURL(), TokenURL: idp.TokenURL()},
			{ID: "g", ClientID: "c", AuthURL: idp.AuthURL(), TokenURL: idp.TokenURL()}}}, "configured twice"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := oauth.New(ctx, tc.cfg, oauth.LoadOptions{Getenv: func(string) string { return "" }})
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.Equal(t, "TOLLGATE_OAUTH_MY_GITHUB_CLIENT_SECRET_FILE", oauth.SecretEnv("my-github"))
	require.True(t, strings.HasSuffix(oauth.CallbackPath, "/callback"))
}
