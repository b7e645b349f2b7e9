package gateway_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/internal/tests/browser"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// A person, in headless Chromium: sign in to the inbox, follow the
// waiting call's Connect link, press Connect, grant access on the
// provider's consent page (ory/fosite), and land on the callback page;
// the parked turn resumes by itself and its tool lists issues with the
// token. Nobody sends `connected`.
func TestOAuthConnectInChromium(t *testing.T) {
	ctx := browser.New(t, browser.Options{Width: 1100, Height: 900})
	e := newOAuthEnv(t, oauthEnvOptions{})
	key := e.key("alice", apikey.Scopes)
	id := e.parkIssues("alice")
	e.waitListed(id, workflows.StatusWaiting)
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, browser.DefaultTimeout)
		defer cancel()
		require.NoError(t, chromedp.Do(actx, steps...))
	}
	type css = chromedp.CSS
	section := `section[data-turn="` + id + `"][data-call="i1"]`

	require.NoError(t, browser.Open(ctx, e.http.URL+"/inbox", `#login input[name="key"]`))
	run(chromedp.SendKeys(css(`#login input[name="key"]`), key), chromedp.Submit(css(`#login`)))
	run(chromedp.WaitVisible(css(section + ` a.connect-link`)))
	require.NoError(t, browser.WaitText(ctx, 0, "Needs a connection to github", "Connect github"))

	run(chromedp.Click(css(section+` a.connect-link`), chromedp.NodeVisible))
	run(chromedp.WaitVisible(css(`#connect-form button`)))
	require.NoError(t, browser.WaitText(ctx, 0, "for user alice"))
	run(chromedp.Click(css(`#connect-form button`), chromedp.NodeVisible))

	// The provider's own consent page.
	run(chromedp.WaitVisible(css(`#allow`)))
	require.NoError(t, browser.WaitText(ctx, 0, "asks for access to the account of octocat"))
	run(chromedp.Click(css(`#allow`), chromedp.NodeVisible))

	run(chromedp.WaitVisible(css(`#connected`)))
	require.NoError(t, browser.WaitText(ctx, 0, "Connected github", "runs again"))

	s := e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	c := card(t, s, "i1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Contains(t, outputOf(c), "#1 Checkout is slow")
	require.Equal(t, int64(1), e.idp.APICalls.Load(), "the tool called the API once, with the token")
	cred, err := e.store.Get(context.Background(), "alice", "github")
	require.NoError(t, err)
	page, err := browser.PageText(ctx)
	require.NoError(t, err)
	require.NotContains(t, page, cred.Token)
	e.requireNoToken(id, cred.Token, cred.RefreshToken)
}
