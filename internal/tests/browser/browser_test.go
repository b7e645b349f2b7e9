package browser_test

import (
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/tests/browser"
)

// A page that only shows its text after a script runs, so the test proves
// the browser executed the page, not just fetched it, and that shows more
// in a sandboxed frame, as the Temporal UI renders markdown (a frame
// without allow-same-origin would run in a process of its own, which
// PageText does not read).
const page = `<!doctype html>
<html><body>
<h1 id="title">Inbox</h1>
<iframe sandbox="allow-same-origin" srcdoc="<p>write_file summary.md: pending approval</p>"></iframe>
<p id="late" hidden>loaded by script</p>
<button id="more" onclick="document.getElementById('title').textContent = 'Clicked'">More</button>
<script>
setTimeout(() => {
	const p = document.getElementById("late");
	p.hidden = false;
	p.textContent = "2 calls waiting";
}, 50);
</script>
</body></html>`

func TestOpenReadAndScreenshot(t *testing.T) {
	ctx := browser.New(t, browser.Options{Width: 640, Height: 480})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}))
	t.Cleanup(srv.Close)

	require.NoError(t, browser.Open(ctx, srv.URL, "#title"))
	require.NoError(t, browser.WaitText(ctx, 0, "2 calls waiting", "write_file summary.md: pending approval"))
	title, err := browser.Text(ctx, "#title")
	require.NoError(t, err)
	require.Equal(t, "Inbox", title)
	body, err := browser.PageText(ctx)
	require.NoError(t, err)
	require.Contains(t, body, "2 calls waiting")
	require.Contains(t, body, "write_file summary.md: pending approval")
	require.NotContains(t, body, "loaded by script")
	// Text reads the page itself; the frame's text is not the page's.
	all, err := browser.Text(ctx, "body")
	require.NoError(t, err)
	require.NotContains(t, all, "pending approval")

	require.NoError(t, browser.Click(ctx, "#more"))
	require.NoError(t, browser.WaitText(ctx, 0, "Clicked"))

	err = browser.WaitText(ctx, 300*time.Millisecond, "never shown")
	require.ErrorContains(t, err, `does not show ["never shown"]`)

	path := filepath.Join(t.TempDir(), "shots", "page.png")
	require.NoError(t, browser.Screenshot(ctx, path))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Equal(t, 640, img.Bounds().Dx())
	require.Equal(t, 480, img.Bounds().Dy())
}

// tb records how Require ended a test instead of ending it.
type tb struct {
	testing.TB
	skipped, failed string
}

func (r *tb) Helper()                        {}
func (r *tb) Skipf(format string, a ...any)  { r.skipped = fmt.Sprintf(format, a...) }
func (r *tb) Fatalf(format string, a ...any) { r.failed = fmt.Sprintf(format, a...) }

func TestRequireSkipsWithoutChromiumUnlessCI(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "chromium")

	// Through TOLLGATE_CHROMIUM a missing browser was asked for: fail.
	t.Setenv("CI", "")
	t.Setenv(browser.PathEnv, missing)
	r := &tb{TB: t}
	browser.Require(r)
	require.Empty(t, r.skipped)
	require.Contains(t, r.failed, missing)

	// The default path: skip on a developer's machine, fail under CI.
	t.Setenv(browser.PathEnv, "")
	if _, err := os.Stat(browser.DefaultPath); err == nil {
		r = &tb{TB: t}
		browser.Require(r)
		require.Empty(t, r.skipped+r.failed, "Chromium is installed at %s", browser.DefaultPath)
		return
	}
	r = &tb{TB: t}
	browser.Require(r)
	require.Contains(t, r.skipped, "apt-get install chromium")
	require.Empty(t, r.failed)

	t.Setenv("CI", "1")
	r = &tb{TB: t}
	browser.Require(r)
	require.Empty(t, r.skipped)
	require.Contains(t, r.failed, "CI must install it")
}
