// Package browser starts a headless Chromium for tests and gives them the
// few things a test does with a page: open it and wait until it shows
// something, read its text, and save a screenshot.
//
// The browser is the system's Chromium (Debian and Ubuntu: the chromium
// package), found at /usr/bin/chromium or wherever TOLLGATE_CHROMIUM
// points. Tests call Require (or New, which calls it) so that a machine
// without Chromium skips them, and CI, where CI is set, fails instead.
package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// DefaultPath is where Debian's chromium package installs the browser.
const DefaultPath = "/usr/bin/chromium"

// PathEnv overrides DefaultPath.
const PathEnv = "TOLLGATE_CHROMIUM"

// Default viewport: wide enough for the Temporal UI's workflow page without
// its narrow layout, short enough that a screenshot stays readable.
const (
	DefaultWidth  = 1280
	DefaultHeight = 900
)

// DefaultTimeout bounds each wait of Open and WaitText. A shared CI machine
// can be slow to render; every wait ends as soon as its condition holds.
const DefaultTimeout = 30 * time.Second

// Options configure the browser.
type Options struct {
	// Path of the Chromium binary; default Path().
	Path string
	// Width and Height of the viewport in CSS pixels; defaults
	// DefaultWidth and DefaultHeight.
	Width, Height int
	// Logf receives the browser's protocol errors; nil drops them.
	Logf func(format string, args ...any)
}

// Path is the Chromium binary to run: TOLLGATE_CHROMIUM if set, else
// DefaultPath.
func Path() string {
	if p := os.Getenv(PathEnv); p != "" {
		return p
	}
	return DefaultPath
}

// Require skips the test when there is no Chromium to run, so that a
// developer without one can still run the other tests. Under CI (CI set
// to anything) it fails instead: there a missing browser is a broken
// machine, not a choice. A TOLLGATE_CHROMIUM that names a missing file
// always fails, since someone asked for that browser.
func Require(t testing.TB) {
	t.Helper()
	p := Path()
	err := executable(p)
	if err == nil {
		return
	}
	switch {
	case os.Getenv(PathEnv) != "":
		t.Fatalf("browser test: %s=%s: %v", PathEnv, p, err)
	case os.Getenv("CI") != "":
		t.Fatalf("browser test needs Chromium at %s (%v); CI must install it (Debian/Ubuntu: apt-get install chromium)", p, err)
	default:
		t.Skipf("browser test skipped: no Chromium at %s (%v); install it (Debian/Ubuntu: apt-get install chromium) or set %s", p, err, PathEnv)
	}
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("not found: %w", errors.Unwrap(err))
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not an executable file")
	}
	return nil
}

// Start runs a headless Chromium and returns a context whose actions run
// in its first tab, and the cleanup that stops the browser and removes its
// temporary profile. The browser has started when Start returns, so a
// broken installation fails here rather than at the first page.
func Start(ctx context.Context, opts Options) (context.Context, context.CancelFunc, error) {
	if opts.Path == "" {
		opts.Path = Path()
	}
	if opts.Width == 0 {
		opts.Width = DefaultWidth
	}
	if opts.Height == 0 {
		opts.Height = DefaultHeight
	}
	// Only these flags: no-sandbox because test machines often run as root
	// or in containers without user namespaces, no background networking
	// so a test never talks to anything but the pages it opens. chromedp
	// adds a temporary --user-data-dir and its debugging pipe.
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(opts.Path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(opts.Width, opts.Height),
	)
	var copts []chromedp.ContextOption
	if opts.Logf != nil {
		copts = append(copts, chromedp.WithErrorf(opts.Logf))
	}
	bctx, cancelTab := chromedp.NewContext(allocCtx, copts...)
	cleanup := func() {
		cancelTab()
		cancelAlloc()
	}
	// The window size is the outer window; the viewport is set too so
	// that screenshots have exactly the asked size.
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(int64(opts.Width), int64(opts.Height))); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("start Chromium %s: %w", opts.Path, err)
	}
	return bctx, cleanup, nil
}

// New is Start for a test: it calls Require, fails the test when the
// browser does not start, and stops the browser when the test ends.
func New(t testing.TB, opts Options) context.Context {
	t.Helper()
	Require(t)
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cleanup, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return ctx
}

// Open navigates to url and waits, up to DefaultTimeout in all, until the
// page has loaded and an element matching the CSS selector ready is
// visible.
func Open(ctx context.Context, url, ready string) error {
	// Start ran the first action, so a deadline here limits this page and
	// not the browser's life.
	wctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	if err := chromedp.Do(wctx, chromedp.Navigate(url)); err != nil {
		return fmt.Errorf("open %s: %w", url, err)
	}
	if err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(ready))); err != nil {
		return fmt.Errorf("open %s: wait for %q: %w", url, ready, err)
	}
	return nil
}

// Click waits, up to DefaultTimeout, until an element matching the CSS
// selector is visible, and clicks it.
func Click(ctx context.Context, selector string) error {
	wctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	if err := chromedp.Do(wctx, chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible)); err != nil {
		return fmt.Errorf("click %q: %w", selector, err)
	}
	return nil
}

// WaitText waits, up to timeout (DefaultTimeout when zero), until the
// page's visible text, frames included (see PageText), contains every one
// of texts. On timeout the error names the texts still missing.
func WaitText(ctx context.Context, timeout time.Duration, texts ...string) error {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		body, err := PageText(ctx)
		var missing []string
		for _, s := range texts {
			if !strings.Contains(body, s) {
				missing = append(missing, s)
			}
		}
		switch {
		case err == nil && len(missing) == 0:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("wait for text %q: %w", texts, ctx.Err())
		case time.Now().After(deadline) && err != nil:
			return fmt.Errorf("wait for text %q: %w", texts, err)
		case time.Now().After(deadline):
			return fmt.Errorf("wait for text: after %v the page does not show %q", timeout, missing)
		}
		time.Sleep(pollEvery)
	}
}

// pollEvery is how often WaitText reads the page again.
const pollEvery = 100 * time.Millisecond

// PageText is the visible text of the page and of its frames, each
// frame's after the page's, separated by newlines. Pages often render
// what a person reads in frames (the Temporal UI shows markdown in
// sandboxed iframes), which a script in the page cannot read; the browser
// can, so the frames are read through the DevTools protocol. Frames that
// Chromium runs in a process of their own (another site's, or sandboxed
// without allow-same-origin) are not read.
func PageText(ctx context.Context) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	texts, err := chromedp.Run(wctx, frameTexts)
	if err != nil {
		return "", fmt.Errorf("read the page's text: %w", err)
	}
	return strings.Join(texts, "\n"), nil
}

// frameTexts is the innerText of every frame's body, the main frame first.
// Each frame is read in an isolated world of its own, so neither the
// page's scripts nor a sandbox without scripts stand in the way.
func frameTexts(ctx context.Context, t *chromedp.Target) ([]string, error) {
	tree, err := cdp.Call(ctx, t, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return nil, err
	}
	var texts []string
	var walk func(ft *page.FrameTree, main bool) error
	walk = func(ft *page.FrameTree, main bool) error {
		if ft == nil || ft.Frame == nil {
			return nil
		}
		s, err := frameText(ctx, t, ft.Frame.ID)
		switch {
		case err != nil && main:
			return err
		case err == nil:
			texts = append(texts, s)
		}
		// A frame that went away or lives in another process is skipped:
		// the page is still rendering, and WaitText asks again.
		for _, c := range ft.ChildFrames {
			if err := walk(c, false); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(tree.FrameTree, true); err != nil {
		return nil, err
	}
	return texts, nil
}

func frameText(ctx context.Context, t *chromedp.Target, frame cdp.FrameID) (string, error) {
	world, err := cdp.Call(ctx, t, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: frame, WorldName: "tollgate-browser-text"})
	if err != nil {
		return "", err
	}
	byValue := true
	r, err := cdp.Call(ctx, t, runtime.Evaluate, runtime.EvaluateParams{
		Expression:    `document.body ? document.body.innerText : ""`,
		ContextID:     world.ExecutionContextID,
		ReturnByValue: &byValue,
	})
	if err != nil {
		return "", err
	}
	if r.ExceptionDetails != nil {
		return "", fmt.Errorf("read frame %s: %s", frame, r.ExceptionDetails.Text)
	}
	var s string
	if r.Result == nil || json.Unmarshal(r.Result.Value, &s) != nil {
		return "", fmt.Errorf("read frame %s: not a string", frame)
	}
	return s, nil
}

// Text is the visible text of the first element matching the CSS
// selector in the page (not in its frames), waiting up to DefaultTimeout
// for it to be present.
func Text(ctx context.Context, selector string) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	s, err := chromedp.Run(wctx, chromedp.Text(chromedp.CSS(selector)))
	if err != nil {
		return "", fmt.Errorf("read the text of %q: %w", selector, err)
	}
	return s, nil
}

// Screenshot saves a PNG of the whole page, beyond the viewport where the
// page is longer, to path, creating its directory.
func Screenshot(ctx context.Context, path string) error {
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return nil
}
