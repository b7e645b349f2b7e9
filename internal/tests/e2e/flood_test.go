package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/internal/devserver"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// rawJSON is a payload holding data byte for byte, as a client other than
// Go's encoder may send it.
func rawJSON(data string) converter.RawValue {
	return converter.NewRawValue(&commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
		Data:     []byte(data),
	})
}

// worker --dev's embedded server refuses a Signal larger than any valid
// respond (27 Signals of 1.9 MB used to get a parked turn terminated by
// the server), and still takes the largest valid one, sent inline by a
// client without Tollgate's payload store.
func TestDevServerRefusesOversizedSignals(t *testing.T) {
	t.Parallel()
	port, err := devserver.FreePort()
	require.NoError(t, err)
	srv, err := devserver.Start(devserver.Options{Port: port, DynamicConfig: devserver.DevDynamicConfig()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	e := newEnvAt(t, "signal_size_limited", srv.Address(), "default")
	t.Cleanup(e.stopAll)
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "x"})),
		expecting(reply("Written."), 1, "a.md"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write a.md", Model: model, Tools: []string{"write_file"}})
	e.waitCard(run, "w1", results.StatePendingApproval)

	plain, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: "default", Logger: sdkLogger})
	require.NoError(t, err)
	defer plain.Close()
	ctx := context.Background()
	flood := workflows.Response{CallID: "w1", Decision: results.DecisionDeny, Reason: strings.Repeat("x", 1<<20)}
	err = plain.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.RespondName, flood)
	var invalid *serviceerror.InvalidArgument
	require.True(t, errors.As(err, &invalid), "the server took a 1 MiB Signal: %v", err)

	content := strings.Repeat("c", 250<<10)
	args, err := json.Marshal(map[string]string{"path": "a.md", "content": content})
	require.NoError(t, err)
	largest := workflows.Response{CallID: "w1", Decision: results.DecisionApprove, Arguments: args,
		Reason: strings.Repeat("\x01", 4<<10), By: strings.Repeat("\x02", 256)}
	encoded, err := json.Marshal(largest)
	require.NoError(t, err)
	require.Greater(t, len(encoded), 270<<10, "every byte of reason and by is escaped")
	require.LessOrEqual(t, len(encoded), workflows.MaxRespondBytes)
	require.NoError(t, plain.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.RespondName, largest))

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	require.Zero(t, res.InvalidSignals)
	b, err := os.ReadFile(filepath.Join(e.ws, "a.md"))
	require.NoError(t, err)
	require.Equal(t, content, string(b))
}

// Text that is not UTF-8 is refused, as an Update (with a sentence) and
// as a Signal (counted); a payload that is not an object is refused with
// a sentence, not the SDK's decode error. The history goes to the corpus
// (turn version 5).
func TestRespondTextThatIsNotUTF8IsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "respond_text_checked")
	model := e.script(
		reply("", call("w1", "write_file", map[string]string{"path": "a.md", "content": "x"})),
		expecting(reply("Written."), 1, "a.md"),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Write a.md", Model: model, Tools: []string{"write_file"}})
	e.waitCard(run, "w1", results.StatePendingApproval)

	ctx := context.Background()
	require.NoError(t, e.caller.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.RespondName,
		rawJSON("{\"call_id\":\"w1\",\"decision\":\"approve\",\"by\":\"m\xffllory\"}")))
	_, err := respondAny(e.caller, run, rawJSON(`{"call_id":"w1","decision":"approve","reason":"\ud800"}`))
	require.ErrorContains(t, err, "reason is not valid UTF-8 text")
	_, err = respondAny(e.caller, run, "approve")
	require.ErrorContains(t, err, "the payload is not a respond object: it is a JSON string")
	require.NotContains(t, err.Error(), "Go value")
	s := e.waitState(run, "the Signal counted", func(s workflows.State) bool { return s.InvalidSignals == 1 })
	require.Contains(t, s.LastInvalidSignal, "by is not valid UTF-8 text")

	_, err = respond(e.caller, run, workflows.Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice"})
	require.NoError(t, err)
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status)
	c := mustCard(t, res.Cards, "w1")
	require.Len(t, c.Decisions, 1)
	require.Equal(t, "alice", c.Decisions[0].By)
	e.record(run)
}

// respondAny sends any payload as the respond Update.
func respondAny(c client.Client, run client.WorkflowRun, arg any) (results.Card, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: run.GetID(), RunID: run.GetRunID(), UpdateName: workflows.RespondName,
		Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return results.Card{}, err
	}
	var card results.Card
	return card, h.Get(ctx, &card)
}

// A session refuses a send Signal whose text is not UTF-8 and counts it;
// the history goes to the session corpus (session version 1).
func TestSessionTextThatIsNotUTF8IsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "session_text_checked")
	model := e.script(reply("Hello."))
	e.startWorker()
	run := e.startSession(workflows.SessionInput{Turn: workflows.Input{Model: model}})
	id := run.GetID()
	require.NoError(t, e.caller.SignalWorkflow(context.Background(), id, "", workflows.SendName, rawJSON("{\"text\":\"hi \xff\"}")))
	e.conversation(id, "the Signal counted", func(c workflows.Conversation) bool { return c.InvalidSignals == 1 })
	sent := e.send(id, "u1", "Hi")
	require.Equal(t, workflows.StatusCompleted, e.turnResult(sent.TurnID).Status)
	done := e.end(id, workflows.End{By: "ada"})
	require.Contains(t, done.LastInvalidSignal, "text is not valid UTF-8 text")
	require.Equal(t, 1, done.TurnsStarted)
	e.recordTo(sessionCorpusDir, "session_text_checked", id, run.GetRunID())
}
