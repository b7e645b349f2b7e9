package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// notesBinary builds the MCP server of docs/mcp.md's demo (examples/mcp/notes)
// into the test's temporary directory.
func notesBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "notes-mcp")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/tollgate-dev/tollgate/examples/mcp/notes").CombinedOutput()
	require.NoError(t, err, "build the notes MCP server: %s", out)
	return bin
}

// openNotes starts the notes server's tools as a worker process would at
// start: a configuration, a state directory in the data directory.
func (e *env) openNotes(bin, notesDir string) []tool.Tool {
	e.t.Helper()
	cfg := mcp.Config{Servers: map[string]mcp.Server{"notes": {
		Command: bin,
		Args:    []string{"--dir", notesDir, "--seed"},
		Tools:   map[string]mcp.Override{"rename": {Approval: "never"}},
	}}}
	ts, err := mcp.Open(context.Background(), cfg, mcp.Options{Connections: e.conns, StateDir: mcp.StateDir(e.data)})
	require.NoError(e.t, err)
	e.t.Cleanup(ts.Close)
	return ts.Tools()
}

// The MCP demo of docs/mcp.md on a real server: a read-only MCP tool runs at
// once, a destructive one waits for its approval, and one whose server
// asks the user (an elicitation) parks as a choice that a person answers
// through respond; the server gets the answer when the call is issued
// again. Recorded as mcp_notes.
func TestMCPToolsWaitForApprovalAndElicitedAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "mcp_notes")
	bin := notesBinary(t)
	notesDir := filepath.Join(t.TempDir(), "notes")
	e.tools = e.openNotes(bin, notesDir)
	model := e.script(
		reply("Let me look at your notes first.", call("call_list_notes", "notes.list", map[string]any{})),
		expecting(reply("I'll put the idea in a note of its own.", call("call_append_idea", "notes.append", map[string]string{"name": "ideas", "text": "- try MCP tools in Tollgate"})), 1, "todo: - water the plants"),
		expecting(reply("Now I'll file it under todo.", call("call_rename_idea", "notes.rename", map[string]string{"from": "ideas", "to": "todo"})), 1, "Appended"),
		expecting(reply("Done."), 1, "Merged ideas into todo."),
	)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Add my idea to my notes and file it under todo", Model: model, Tools: []string{"notes.list", "notes.append", "notes.rename"}, User: "ada"})

	s := e.waitCard(run, "call_append_idea", results.StatePendingApproval)
	require.Equal(t, results.StateSucceeded, mustCard(t, s.Cards, "call_list_notes").State, "a read-only MCP tool needs no approval")
	require.NoFileExists(t, filepath.Join(notesDir, "ideas.md"), "nothing runs before its approval")
	_, err := respond(e.dial("e2e-approver"), run, workflows.Response{CallID: "call_append_idea", Decision: results.DecisionApprove, By: "ada"})
	require.NoError(t, err)

	s = e.waitCard(run, "call_rename_idea", results.StateWaitingAnswer)
	in := mustCard(t, s.Cards, "call_rename_idea").Interrupt
	require.Equal(t, results.InterruptChoice, in.Type)
	require.Equal(t, "The MCP server notes asks: There is already a note called todo. What should happen to ideas?\nAction", in.Prompt)
	require.Equal(t, []results.Option{{ID: "merge", Label: "Merge it into todo"}, {ID: "keep_both", Label: "Keep both (rename to todo-2)"}}, in.Options)
	require.FileExists(t, filepath.Join(notesDir, "ideas.md"), "the server did nothing past its question")

	_, err = respond(e.caller, run, workflows.Response{CallID: "call_rename_idea", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"delete"`)})
	require.ErrorContains(t, err, `"delete" is not one of the options: merge, keep_both`)
	_, err = respond(e.caller, run, workflows.Response{CallID: "call_rename_idea", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"merge"`), By: "ada"})
	require.NoError(t, err)

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, []string{
		"call_list_notes error=false 1 notes:\ntodo: - water the plants",
		"call_append_idea error=false Appended 28 bytes to ideas.",
		"call_rename_idea error=false Merged ideas into todo.",
	}, toolTexts(res.Messages))
	b, err := os.ReadFile(filepath.Join(notesDir, "todo.md"))
	require.NoError(t, err)
	require.Equal(t, "- water the plants\n- try MCP tools in Tollgate\n", string(b))
	require.NoFileExists(t, filepath.Join(notesDir, "ideas.md"))
	entries, err := os.ReadDir(mcp.StateDir(e.data))
	require.NoError(t, err)
	require.Empty(t, entries, "a finished call leaves no record behind")
	e.record(run)
}

// The worker stops while an elicitation waits (nothing runs meanwhile: the
// call has ended its run and the turn holds the question); a new worker,
// with its own session to the server, gets the answer and finishes the
// call from the record in the data directory.
func TestMCPElicitationSurvivesAWorkerRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "mcp_elicitation_restart")
	e.taskTimeout = 2 * time.Second
	bin := notesBinary(t)
	notesDir := filepath.Join(t.TempDir(), "notes")
	e.tools = e.openNotes(bin, notesDir)
	require.NoError(t, os.WriteFile(filepath.Join(notesDir, "draft.md"), []byte("- a draft\n"), 0o644))
	model := e.script(
		reply("", call("r1", "notes.rename", map[string]string{"from": "draft", "to": "todo"})),
		expecting(reply("Kept both."), 1, "renamed draft to todo-2"),
	)
	first := e.startWorker()
	run := e.start(workflows.Input{Prompt: "File the draft under todo", Model: model, Tools: []string{"notes.rename"}})
	e.waitCard(run, "r1", results.StateWaitingAnswer)
	e.stopWorker(first)

	// A new worker process would open the servers afresh.
	e.tools = e.openNotes(bin, notesDir)
	e.startWorker()
	_, err := respondReliably(e.caller, run, "answer-r1", workflows.Response{CallID: "r1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"keep_both"`), By: "ada"})
	require.NoError(t, err)
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, []string{"r1 error=false todo is taken; renamed draft to todo-2."}, toolTexts(res.Messages))
	c := mustCard(t, res.Cards, "r1")
	require.Len(t, c.Decisions, 1)
	require.Equal(t, "ada", c.Decisions[0].By)
	require.FileExists(t, filepath.Join(notesDir, "todo-2.md"))
	require.True(t, strings.HasPrefix(res.Text, "Kept both."))
	e.record(run)
}
