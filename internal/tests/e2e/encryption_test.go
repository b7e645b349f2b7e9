package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/replay"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/codec"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// encryptedCorpus holds encrypted histories and the public, test-only keys
// that encrypted them.
const encryptedCorpus = corpusDir + "/encrypted"

// testKeys are the committed test keys: the current one first, then the
// one it rotated from.
func testKeys(t *testing.T) (current, original codec.Key) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(encryptedCorpus, "test-keys"))
	require.NoError(t, err)
	keys, err := codec.ParseKeys(b)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	return keys[0], keys[1]
}

func keyring(t *testing.T, keys ...codec.Key) *codec.Keyring {
	t.Helper()
	k, err := codec.New(keys...)
	require.NoError(t, err)
	return k
}

// dialWithCodec connects a client that encrypts with keys, as every
// Tollgate process does once TOLLGATE_CODEC_KEYS_FILE is set.
func (e *env) dialWithCodec(identity string, keys *codec.Keyring) client.Client {
	e.t.Helper()
	ext, err := clientconfig.ExternalStorage(e.data)
	require.NoError(e.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort: e.hostPort, Namespace: e.namespace, Identity: identity, Logger: sdkLogger,
		ExternalStorage: ext,
		DataConverter:   keys.DataConverter(),
	})
	require.NoError(e.t, err)
	e.t.Cleanup(c.Close)
	return c
}

// startEncryptedWorker starts a worker whose client and stores encrypt
// with keys.
func (e *env) startEncryptedWorker(keys *codec.Keyring) *runningWorker {
	e.t.Helper()
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		DataDir:     e.data,
		Workspace:   e.ws,
		Models:      providers.Config{ScriptDir: e.scripts},
		Tools:       e.tools,
		Connections: e.conns,
		Codec:       keys,
	})
	require.NoError(e.t, err)
	c := e.dialWithCodec("e2e-worker-"+keys.EncryptKeyID(), keys)
	w := worker.New(c, e.tq, worker.Options{Plugins: []worker.Plugin{plugin}, WorkerStopTimeout: 100 * time.Millisecond})
	require.NoError(e.t, w.Start())
	rw := &runningWorker{w: w, c: c}
	e.mu.Lock()
	e.workers = append(e.workers, rw)
	e.mu.Unlock()
	return rw
}

// rawHistory is the run's history as the server holds it, fetched over
// the bare gRPC API so that no data converter, codec or payload storage
// touches it.
func (e *env) rawHistory(run client.WorkflowRun) []*historypb.HistoryEvent {
	e.t.Helper()
	plain := e.dial("e2e-plain")
	var out []*historypb.HistoryEvent
	var token []byte
	for {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		resp, err := plain.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace:     e.namespace,
			Execution:     &commonpb.WorkflowExecution{WorkflowId: run.GetID(), RunId: run.GetRunID()},
			NextPageToken: token,
		})
		cancel()
		require.NoError(e.t, err)
		out = append(out, resp.GetHistory().GetEvents()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out
		}
	}
}

// eventsWith are the ids of the events whose wire bytes hold s. Payload
// data sits in the wire form as is, so plaintext cannot hide from it.
func eventsWith(t *testing.T, events []*historypb.HistoryEvent, s string) []int64 {
	t.Helper()
	var ids []int64
	for _, ev := range events {
		b, err := proto.Marshal(ev)
		require.NoError(t, err)
		if bytes.Contains(b, []byte(s)) {
			ids = append(ids, ev.GetEventId())
		}
	}
	return ids
}

// filesWith are the files under dir whose bytes hold s.
func filesWith(t *testing.T, dir, s string) (hits []string, files int) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if bytes.Contains(b, []byte(s)) {
			hits = append(hits, path)
		}
		return nil
	}))
	return hits, files
}

// With encryption on, what a person typed, what a tool returned and what
// the model answered appear nowhere in the server's history or in the
// data directory; a turn that parked under one key finishes after the key
// rotated (the old key decrypt-only), and what it writes after the
// rotation uses the new key.
func TestEncryptionHidesContentAndSurvivesKeyRotation(t *testing.T) {
	t.Parallel()
	const (
		promptMarker = "prompt-marker-3e9b1"
		toolMarker   = "tool-output-marker-77ac"
		argsMarker   = "arguments-marker-0d42"
		answerMarker = "answer-marker-c5f0"
	)
	current, original := testKeys(t)
	before := keyring(t, original)
	after := keyring(t, current, original)

	e := newEnv(t, "approval_rotated")
	e.caller = e.dialWithCodec("e2e-starter", before)
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte("Notes: "+toolMarker+"\n"), 0o600))
	model := e.script(
		reply("", call("r1", "read_file", map[string]string{"path": "notes.txt"})),
		expecting(reply("", call("w1", "write_file", map[string]string{"path": "summary.md", "content": argsMarker})), 1, toolMarker),
		expecting(reply(answerMarker), 1, "summary.md"),
	)
	old := e.startEncryptedWorker(before)
	run := e.start(workflows.Input{Prompt: "Summarise notes.txt " + promptMarker, Model: model, Tools: []string{"read_file", "write_file"}})
	e.waitCard(run, "w1", results.StatePendingApproval)

	// Rotate: every process restarts with the new key first and the old
	// one decrypt-only.
	e.stopWorker(old)
	e.caller = e.dialWithCodec("e2e-starter-rotated", after)
	e.startEncryptedWorker(after)
	// The run handle decodes with its client's keys: take it from the
	// rotated client.
	run = e.caller.GetWorkflow(context.Background(), run.GetID(), run.GetRunID())
	_, err := respondReliably(e.caller, run, "approve-w1", workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice"})
	require.NoError(t, err)
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Equal(t, answerMarker, res.Text, "a client with the keys reads the answer")
	require.Contains(t, outputText(mustCard(t, res.Cards, "r1")), toolMarker)

	events := e.rawHistory(run)
	markers := []string{promptMarker, toolMarker, argsMarker, answerMarker}
	for _, m := range markers {
		require.Empty(t, eventsWith(t, events, m), "%q is in the server's history in plain text", m)
	}
	// The check can fail: the same wire form of a plain payload shows it.
	plainPayload, err := converter.GetDefaultDataConverter().ToPayload(workflows.Input{Prompt: promptMarker})
	require.NoError(t, err)
	plainEvent := &historypb.HistoryEvent{EventId: 1, Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
		WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{Input: &commonpb.Payloads{Payloads: []*commonpb.Payload{plainPayload}}},
	}}
	require.Equal(t, []int64{1}, eventsWith(t, []*historypb.HistoryEvent{plainEvent}, promptMarker))

	// Payloads written before the rotation name the old key, after it the
	// new one: the last event (the result) was written after.
	require.Contains(t, eventsWith(t, events, original.ID), int64(1), "the start was encrypted with the original key")
	last := events[len(events)-1].GetEventId()
	require.Contains(t, eventsWith(t, events, current.ID), last, "the result was encrypted with the rotated key")
	require.NotContains(t, eventsWith(t, events, original.ID), last)

	// A client without the keys gets ciphertext, not the answer.
	var plainRes workflows.Result
	require.Error(t, e.dial("e2e-no-keys").GetWorkflow(context.Background(), run.GetID(), run.GetRunID()).Get(context.Background(), &plainRes))
	recordEncrypted(t, e, run)

	// Transcripts, stored outputs and payloads: ciphertext on disk too.
	for _, m := range markers {
		hits, _ := filesWith(t, e.data, m)
		require.Empty(t, hits, "%q is in the data directory in plain text", m)
	}
}

// A tool output too large for history lands in the payload store, and
// there too only as ciphertext.
func TestEncryptionCoversThePayloadStore(t *testing.T) {
	t.Parallel()
	const marker = "stored-output-marker-91d3"
	noise := make([]byte, 300<<10)
	_, err := rand.Read(noise)
	require.NoError(t, err)
	// Random text does not compress, so the output stays large after the
	// codec's compression.
	whole := marker + "\n" + base64.StdEncoding.EncodeToString(noise) + "\n" + marker
	big := tool.MustFunc(tool.Spec{Name: "dump", Description: "Prints a lot.", Idempotent: true, Concurrent: true},
		func(context.Context, tool.Call, struct{}) (results.Outcome, error) {
			return results.SucceedText(whole), nil
		})
	current, _ := testKeys(t)
	keys := keyring(t, current)
	e := newEnv(t, "encrypted_payload_store", big)
	e.caller = e.dialWithCodec("e2e-starter", keys)
	model := e.script(reply("", call("d1", "dump", map[string]string{})), expecting(reply("Dumped."), 1, "[truncated]"))
	e.startEncryptedWorker(keys)
	run := e.start(workflows.Input{Prompt: "Dump", Model: model, Tools: []string{"dump"}})
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Contains(t, outputText(mustCard(t, res.Cards, "d1")), marker, "the card's excerpt reads back decrypted")

	require.Empty(t, eventsWith(t, e.rawHistory(run), marker))
	hits, files := filesWith(t, e.data, marker)
	require.Empty(t, hits, "the marker is in the data directory in plain text")
	require.Positive(t, files, "the output was stored")
}

// recordEncrypted writes the run's history to the encrypted corpus when
// -record is set.
func recordEncrypted(t *testing.T, e *env, run client.WorkflowRun) {
	t.Helper()
	if !*record {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var buf bytes.Buffer
	require.NoError(t, replay.Export(ctx, e.dial("e2e-recorder"), run.GetID(), run.GetRunID(), &buf))
	out := buf.Bytes()
	require.NotContains(t, string(out), "externalPayloads", "a corpus history must not refer to externally stored payloads")
	if host, err := os.Hostname(); err == nil && host != "" {
		out = bytes.ReplaceAll(out, []byte(`"name": "`+host+`:`), []byte(`"name": "recorder:`))
	}
	require.NoError(t, os.MkdirAll(encryptedCorpus, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(encryptedCorpus, e.name+".json"), out, 0o644))
}
