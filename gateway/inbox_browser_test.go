package gateway_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/tests/browser"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/workflows"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "also save the inbox screenshot to docs/inbox.png (docs/gateway.md shows it)")

// screenshotFile is docs/gateway.md's screenshot, relative to this package.
const screenshotFile = "../docs/inbox.png"

func init() {
	prompts["release"] = "Release 1.2.3: deploy it to production and add it to the changelog"
	scripts["release"] = tollgatetest.NewModel(
		tollgatetest.Reply("I'll deploy 1.2.3 to production and add it to the changelog.",
			tollgatetest.Call("d1", "deploy", map[string]string{"env": "production", "version": "1.2.3"}),
			tollgatetest.Call("w1", "write_file", map[string]string{"path": "CHANGELOG.md", "content": "## 1.2.3\n\n- Faster checkout\n- Refunds show their order\n"})),
		tollgatetest.Reply("Deployed and noted in the changelog."),
	)
}

// A person, in a real browser: log in with a key, approve one call from
// the inbox, edit the other's arguments (first wrongly, and see why
// inline), approve it, and the turn completes.
func TestInboxInChromium(t *testing.T) {
	ctx := browser.New(t, browser.Options{Width: 1100, Height: 900})
	e := newEnv(t, envOptions{})
	key := e.key("ops", readAnswer)
	id := e.park("", "release", "ann", 2)
	e.waitListed(id, workflows.StatusWaiting)
	d1 := `section[data-turn="` + id + `"][data-call="d1"]`
	w1 := `section[data-turn="` + id + `"][data-call="w1"]`
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, browser.DefaultTimeout)
		defer cancel()
		require.NoError(t, chromedp.Do(actx, steps...))
	}
	type css = chromedp.CSS

	require.NoError(t, browser.Open(ctx, e.http.URL+"/inbox", `#login input[name="key"]`))
	run(chromedp.SendKeys(css(`#login input[name="key"]`), key), chromedp.Submit(css(`#login`)))
	run(chromedp.WaitVisible(css(d1)), chromedp.WaitVisible(css(w1)))
	require.NoError(t, browser.WaitText(ctx, 0, "asked by ann", "Release 1.2.3: deploy it", "+- Faster checkout"))

	shot := filepath.Join(t.TempDir(), "inbox.png")
	require.NoError(t, browser.Screenshot(ctx, shot))
	if *updateScreenshot {
		b, err := os.ReadFile(shot)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(screenshotFile, b, 0o644))
	}

	// Approve the changelog write.
	run(chromedp.Click(css(w1+` .approve-form button`), chromedp.NodeVisible), chromedp.WaitNotPresent(css(w1)))

	// An edit the schema refuses: the validator's sentence beside the
	// call, the text kept.
	args := d1 + ` textarea[name="arguments"]`
	run(chromedp.SetValue(css(args), `{"env": "moon", "version": "1.2.3"}`), chromedp.Click(css(d1+` .edit-form button`), chromedp.NodeVisible))
	run(chromedp.WaitVisible(css(d1 + ` .error`)))
	msg, err := browser.Text(ctx, d1+` .error`)
	require.NoError(t, err)
	require.Contains(t, msg, "the edited arguments for call d1 do not validate")
	kept, err := chromedp.Run(ctx, chromedp.Value(css(args)))
	require.NoError(t, err)
	require.JSONEq(t, `{"env": "moon", "version": "1.2.3"}`, kept)
	s, err := e.state(id)
	require.NoError(t, err)
	require.Equal(t, results.StatePendingApproval, card(t, s, "d1").State, "a refused edit changes nothing")

	// A valid edit, approved.
	run(chromedp.SetValue(css(args), `{"env": "staging", "version": "1.2.3"}`), chromedp.Click(css(d1+` .edit-form button`), chromedp.NodeVisible))
	run(chromedp.WaitVisible(css(`#empty`)))
	require.NoError(t, browser.WaitText(ctx, 0, "Nothing is waiting for a person."))

	s = e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	c := card(t, s, "d1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.JSONEq(t, `{"env": "staging", "version": "1.2.3"}`, string(c.EditedArguments))
	require.Equal(t, "ops", c.Decisions[0].By)
	c = card(t, s, "w1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, "ops", c.Decisions[0].By)
}

// The inbox follows the live events: a turn that parks shows up and an
// answered call leaves, with the page neither reloaded nor polling.
func TestInboxUpdatesLiveInChromium(t *testing.T) {
	e := newEnv(t, envOptions{events: sharedNATS(t)})
	// The browser closes first, ending its event stream, so that the
	// gateway's test server can close.
	ctx := browser.New(t, browser.Options{Width: 1100, Height: 900})
	key := e.key("ops", readAnswer)
	type css = chromedp.CSS
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, browser.DefaultTimeout)
		defer cancel()
		require.NoError(t, chromedp.Do(actx, steps...))
	}

	require.NoError(t, browser.Open(ctx, e.http.URL+"/inbox", `#login input[name="key"]`))
	run(chromedp.SendKeys(css(`#login input[name="key"]`), key), chromedp.Submit(css(`#login`)))
	run(chromedp.WaitVisible(css(`body[data-live="on"]`)))
	// A mark that a reload would wipe out.
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded = true`))
	require.NoError(t, err)

	id := e.park("", "release", "ann", 2)
	d1 := `section[data-turn="` + id + `"][data-call="d1"]`
	w1 := `section[data-turn="` + id + `"][data-call="w1"]`
	run(chromedp.WaitVisible(css(d1)), chromedp.WaitVisible(css(w1)))

	for _, call := range []string{"d1", "w1"} {
		r := e.do(request{method: "POST", path: "/v1/turns/" + id + "/respond", key: key, body: `{"call_id":"` + call + `","decision":"approve"}`})
		require.Equal(t, 200, r.code, r.body)
	}
	run(chromedp.WaitNotPresent(css(d1)), chromedp.WaitNotPresent(css(w1)), chromedp.WaitVisible(css(`#empty`)))
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded === true`))
	require.NoError(t, err)
	require.True(t, kept, "the page was updated in place, not reloaded")
}

// GET /live/{id} renders a turn from its AI SDK stream as it is written:
// the reply's text, the calls' cards as they change, the end.
func TestLiveTurnPageRendersTheAISDKStreamInChromium(t *testing.T) {
	e := newEnv(t, envOptions{events: sharedNATS(t)})
	ctx := browser.New(t, browser.Options{Width: 1100, Height: 900})
	key := e.key("ops", readAnswer)
	type css = chromedp.CSS
	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, browser.DefaultTimeout)
		defer cancel()
		require.NoError(t, chromedp.Do(actx, steps...))
	}
	id := e.park("", "release", "ann", 2)

	// Signed out, the stream is refused and the page says how to sign in.
	require.NoError(t, browser.Open(ctx, e.http.URL+"/live/"+id, `#message[data-state="failed"]`))
	require.NoError(t, browser.WaitText(ctx, 0, "Sign in at /inbox"))

	require.NoError(t, browser.Open(ctx, e.http.URL+"/inbox", `#login input[name="key"]`))
	run(chromedp.SendKeys(css(`#login input[name="key"]`), key), chromedp.Submit(css(`#login`)))
	run(chromedp.WaitVisible(css(`section[data-call="d1"]`)))
	require.NoError(t, browser.Open(ctx, e.http.URL+"/live/"+id, `#message[data-state="streaming"]`))
	run(chromedp.WaitVisible(css(`p.card[data-call="d1"][data-state="pending_approval"]`)), chromedp.WaitVisible(css(`p.card[data-call="w1"][data-state="pending_approval"]`)))
	require.NoError(t, browser.WaitText(ctx, 0, "I'll deploy 1.2.3 to production and add it to the changelog."))

	for _, call := range []string{"d1", "w1"} {
		r := e.do(request{method: "POST", path: "/v1/turns/" + id + "/respond", key: key, body: `{"call_id":"` + call + `","decision":"approve"}`})
		require.Equal(t, 200, r.code, r.body)
	}
	run(chromedp.WaitVisible(css(`#message[data-state="finished"]`)))
	require.NoError(t, browser.WaitText(ctx, 0, "Deployed and noted in the changelog.", "The turn ended."))
	run(chromedp.WaitVisible(css(`p.card[data-call="d1"][data-state="succeeded"]`)), chromedp.WaitVisible(css(`pre.tool-part[data-call="w1"][data-state="output-available"]`)))
	texts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("p.text")].map((p) => p.textContent)`))
	require.NoError(t, err)
	require.Equal(t, []string{"I'll deploy 1.2.3 to production and add it to the changelog.", "Deployed and noted in the changelog."}, texts, "each step's text once")
}
