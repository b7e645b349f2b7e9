package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/devserver"
	"github.com/tollgate-dev/tollgate/internal/tests/browser"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/codec"
	"github.com/tollgate-dev/tollgate/workflows"
)

// codecScreenshot is docs/encryption.md's picture of the UI decoding a turn,
// relative to this package.
const codecScreenshot = "../../../docs/temporal-ui-decoded.png"

// The demo turn with encryption on, parked on its write_file call, in the
// Web UI that `worker --dev` serves when TOLLGATE_CODEC_KEYS_FILE is set:
// the server holds only ciphertext, and Chromium shows the prompt because
// the UI's pages ask the dev codec server to decode it.
func TestTheUIDecodesAnEncryptedTurnThroughTheCodecServer(t *testing.T) {
	browser.Require(t)
	t.Parallel()
	began := time.Now()
	const prompt = "Summarise notes.txt into summary.md"
	key, err := codec.NewKey("ui-test")
	require.NoError(t, err)
	keys := keyring(t, key)

	port, err := devserver.FreePort()
	require.NoError(t, err)
	srv, err := devserver.Start(devserver.Options{Port: port})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	e := newEnvAt(t, "ui_codec", srv.Address(), "default")
	e.tq = tollgate.DefaultTaskQueue
	e.caller = e.dialWithCodec("e2e-starter", keys)
	notes, err := os.ReadFile("../../../examples/notes.txt")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), notes, 0o600))
	// The UI asks the worker for the current details, so it stays up.
	e.startEncryptedWorker(keys)

	tg := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	run, err := tg.Start(context.Background(), "tollgate-"+hex.EncodeToString(b), workflows.Input{
		Prompt: prompt,
		Model:  "scripted:demo",
		Tools:  []string{"read_file", "write_file", "ask_user"},
	})
	require.NoError(t, err)
	e.track(run)
	e.waitCard(run, "call_write_summary", results.StatePendingApproval)
	parked := time.Now()

	// The control: a plain client without the codec reads ciphertext. The
	// start event's input names the key and does not hold the prompt, yet
	// decodes to it with the key.
	events := e.rawHistory(run)
	require.Empty(t, eventsWith(t, events, prompt), "the prompt is in the server's history in plain text")
	require.Contains(t, eventsWith(t, events, key.ID), int64(1), "the start event's input is encrypted with the test key")
	input := events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	require.NotEmpty(t, input)
	decoded, err := keys.Decode(input)
	require.NoError(t, err)
	require.True(t, bytes.Contains(decoded[0].GetData(), []byte(prompt)), "the start event's input decodes to the prompt")

	ctx := browser.New(t, browser.Options{Width: 1280, Height: 720})
	dir := t.TempDir()

	// The UI without a codec server shows the same input as ciphertext:
	// what the next UI decodes, it decodes through its codec server.
	plainPort, err := devserver.FreePort()
	require.NoError(t, err)
	plainUI, err := devserver.StartUI(devserver.UIOptions{Port: plainPort, TemporalAddress: srv.Address()})
	require.NoError(t, err)
	t.Cleanup(plainUI.Stop)
	require.NoError(t, browser.Open(ctx, workflowPage(plainUI, run)+"/history", "body"))
	// It renders the start input's ciphertext as a base64 string.
	waitShown(t, ctx, "encrypted history", "Workflow Execution Started", base64.StdEncoding.EncodeToString(input[0].GetData()))
	shown, err := browser.PageText(ctx)
	require.NoError(t, err)
	require.NotContains(t, shown, prompt, "the UI without the codec server shows the prompt")

	// The UI and its codec server, wired as worker --dev wires them.
	uiPort, err := devserver.FreePort()
	require.NoError(t, err)
	codecSrv, err := devserver.StartCodec(devserver.CodecOptions{Keys: keys, UIPort: uiPort})
	require.NoError(t, err)
	t.Cleanup(codecSrv.Stop)
	ui, err := devserver.StartUI(devserver.UIOptions{Port: uiPort, TemporalAddress: srv.Address(), CodecEndpoint: codecSrv.Endpoint()})
	require.NoError(t, err)
	t.Cleanup(ui.Stop)
	require.NoError(t, browser.Open(ctx, workflowPage(ui, run)+"/history", "body"))
	// The Input card shows the decoded start input; the summaries of the
	// activities (user metadata, encrypted too) read as they were written.
	waitShown(t, ctx, "decoded history",
		`"prompt": "`+prompt+`"`,
		"CallModel scripted:demo step 1",
		"read_file notes.txt",
	)
	shot := filepath.Join(dir, "temporal-ui-decoded.png")
	require.NoError(t, browser.Screenshot(ctx, shot))
	if *updateScreenshot {
		require.NoError(t, browser.Screenshot(ctx, codecScreenshot))
	}
	t.Logf("parked in %v; decoded history page shown in %v; %v in all; screenshot in %s",
		parked.Sub(began).Round(time.Millisecond), time.Since(parked).Round(time.Millisecond),
		time.Since(began).Round(time.Millisecond), dir)
}

// workflowPage is the run's page in the UI (ui-server v2.55.0 routes:
// /namespaces/<ns>/workflows/<id>/<run>/<tab>).
func workflowPage(ui *devserver.UI, run client.WorkflowRun) string {
	return fmt.Sprintf("%s/namespaces/default/workflows/%s/%s", ui.URL(), url.PathEscape(run.GetID()), url.PathEscape(run.GetRunID()))
}
