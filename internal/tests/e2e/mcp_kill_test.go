package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// The worker process is SIGKILLed while an MCP call waits for the
// person's answer to its server's question (a multi-round-trip request:
// the call's result asked, and the record is in the data directory); a
// new worker process, with sessions of its own, gets the answer and
// finishes the call. The server's rename happens once: the question's
// round changed nothing, and the answer's round ran once.
func TestMCPElicitationSurvivesAWorkerSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the worker binary and runs it as a subprocess")
	}
	build := buildWorker(t)
	notes := notesBinary(t)
	e := newEnv(t, "mcp_elicitation_sigkill")
	notesDir := filepath.Join(t.TempDir(), "notes")
	require.NoError(t, os.MkdirAll(notesDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(notesDir, "todo.md"), []byte("- water the plants\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(notesDir, "draft.md"), []byte("- a draft\n"), 0o644))

	dir := t.TempDir()
	cfg, err := json.Marshal(map[string]any{"servers": map[string]any{"notes": map[string]any{
		"command": notes, "args": []string{"--dir", notesDir},
		"tools": map[string]any{"rename": map[string]any{"approval": "never"}},
	}}})
	require.NoError(t, err)
	cfgPath := filepath.Join(dir, "mcp.json")
	require.NoError(t, os.WriteFile(cfgPath, cfg, 0o600))
	script := `{"replies": [
	  {"text": "", "tool_calls": [{"id": "r1", "name": "notes.rename", "arguments": {"from": "draft", "to": "todo"}}], "expect": {"last_role": "user"}},
	  {"text": "Kept both.", "expect": {"last_role": "tool", "tool_results": 1}}
	]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kill.json"), []byte(script), 0o600))

	bin := build()
	start := func(name string) *workerProcess {
		return startWorkerProcess(t, e, bin, name, "TOLLGATE_MCP_CONFIG="+cfgPath, "TOLLGATE_SCRIPTS_DIR="+dir)
	}
	first := start("1")
	run := e.start(workflows.Input{Prompt: "File the draft under todo", Model: "scripted:kill.json", Tools: []string{"notes.rename"}, User: "ada"})
	s := e.waitCard(run, "r1", results.StateWaitingAnswer)
	require.Equal(t, results.InterruptChoice, mustCard(t, s.Cards, "r1").Interrupt.Type)
	first.kill(t)
	require.FileExists(t, filepath.Join(notesDir, "draft.md"), "the question's round changed nothing")

	start("2")
	_, err = respondReliably(e.caller, run, "answer-r1", workflows.Response{CallID: "r1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"keep_both"`), By: "ada"})
	require.NoError(t, err)
	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, []string{"r1 error=false todo is taken; renamed draft to todo-2."}, toolTexts(res.Messages))
	entries, err := os.ReadDir(notesDir)
	require.NoError(t, err)
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	require.ElementsMatch(t, []string{"todo.md", "todo-2.md"}, names, "the rename ran exactly once")
	c := mustCard(t, res.Cards, "r1")
	require.Len(t, c.Decisions, 1)
}
