package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/devserver"
	"github.com/tollgate-dev/tollgate/internal/tests/browser"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "also write the Temporal UI screenshot to "+uiScreenshot)

// uiScreenshot is the README's picture of the UI, relative to this package.
const uiScreenshot = "../../../docs/temporal-ui.png"

// The demo turn, parked on its write_file call, as an operator sees it in
// the Temporal Web UI that `worker --dev` serves: Chromium opens the
// workflow's pages and the test reads what they render, not what the API
// returns.
func TestTheUIShowsWhatAParkedTurnWaitsFor(t *testing.T) {
	browser.Require(t)
	t.Parallel()
	began := time.Now()
	// The dev server and task queue of `make run`, so the picture shows
	// what a user sees: the "default" namespace, the "tollgate" queue.
	port, err := devserver.FreePort()
	require.NoError(t, err)
	srv, err := devserver.Start(devserver.Options{Port: port})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	e := newEnvAt(t, "ui_screenshot", srv.Address(), "default")
	e.tq = tollgate.DefaultTaskQueue
	notes, err := os.ReadFile("../../../examples/notes.txt")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), notes, 0o600))
	// The UI asks the worker for the current details, so it stays up.
	e.startWorker()

	// The starter's demo: `starter run --model scripted:demo "Summarise..."`.
	tg := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	run, err := tg.Start(context.Background(), "tollgate-"+hex.EncodeToString(b), workflows.Input{
		Prompt: "Summarise notes.txt into summary.md",
		Model:  "scripted:demo",
		Tools:  []string{"read_file", "write_file", "ask_user"},
	})
	require.NoError(t, err)
	e.mu.Lock()
	e.runs = append(e.runs, run)
	e.mu.Unlock()
	e.waitCard(run, "call_write_summary", results.StatePendingApproval)
	parked := time.Now()

	uiPort, err := devserver.FreePort()
	require.NoError(t, err)
	ui, err := devserver.StartUI(devserver.UIOptions{Port: uiPort, TemporalAddress: srv.Address()})
	require.NoError(t, err)
	t.Cleanup(ui.Stop)
	ctx := browser.New(t, browser.Options{Width: 1280, Height: 720})
	dir := t.TempDir()

	// The URL shape of the UI's routes (ui-server v2.55.0):
	// /namespaces/<ns>/workflows/<id>/<run>/<tab>.
	page := fmt.Sprintf("%s/namespaces/default/workflows/%s/%s", ui.URL(), url.PathEscape(run.GetID()), url.PathEscape(run.GetRunID()))
	require.NoError(t, browser.Open(ctx, page+"/history", "body"))
	// The event history names every step: the activities' summaries and
	// the approval timer's.
	waitShown(t, ctx, "history",
		"Summarise notes.txt into summary.md",
		"CallModel scripted:demo step 1",
		"read_file notes.txt",
		"CallModel scripted:demo step 2",
		"call_write_summary write_file: pending_approval",
	)
	require.NoError(t, browser.Screenshot(ctx, filepath.Join(dir, "history.png")))
	history := time.Now()

	// The User Metadata tab: the turn's summary and details, and the
	// current details the worker answers with, naming the waiting call.
	require.NoError(t, browser.Click(ctx, `a[href$="/user-metadata"]`))
	waitShown(t, ctx, "user-metadata",
		"Summarise notes.txt into summary.md",
		"model scripted:demo, tools read_file, write_file, ask_user",
		"Waiting for a person",
		"call_write_summary write_file summary.md: pending approval",
	)
	shot := filepath.Join(dir, "temporal-ui.png")
	require.NoError(t, browser.Screenshot(ctx, shot))
	if *updateScreenshot {
		require.NoError(t, browser.Screenshot(ctx, uiScreenshot))
	}
	t.Logf("parked in %v; history page shown in %v; user metadata in %v more; %v in all; screenshots in %s",
		parked.Sub(began).Round(time.Millisecond), history.Sub(parked).Round(time.Millisecond),
		time.Since(history).Round(time.Millisecond), time.Since(began).Round(time.Millisecond), dir)
}

// waitShown waits until the page shows every text. When it does not, it
// logs what the page shows and keeps a screenshot outside the test's temp
// dir, which goes away with the test.
func waitShown(t *testing.T, ctx context.Context, tab string, texts ...string) {
	t.Helper()
	err := browser.WaitText(ctx, 0, texts...)
	if err != nil {
		if shown, terr := browser.PageText(ctx); terr == nil {
			t.Logf("the %s page shows:\n%s", tab, shown)
		}
		if f, ferr := os.CreateTemp("", "tollgate-ui-"+tab+"-*.png"); ferr == nil {
			_ = f.Close()
			if browser.Screenshot(ctx, f.Name()) == nil {
				t.Logf("screenshot of the %s page: %s", tab, f.Name())
			}
		}
	}
	require.NoError(t, err, "the %s page", tab)
}
