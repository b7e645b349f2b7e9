package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model/compact"
	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// A turn whose conversation nears policy.context_tokens summarises its
// older part before the next model call, on a real server, and keeps the
// whole conversation for people. The history goes to the corpus.
func TestCompactionSummarizesNearTheWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "compaction_summarized")
	// Each read returns about 500 tokens (the scripted model counts four
	// bytes a token).
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte(strings.Repeat("a note. ", 250)), 0o600))
	replies := []scripted.Reply{}
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		replies = append(replies, reply("", call(id, "read_file", map[string]string{"path": "notes.txt"})))
	}
	model := e.script(append(replies, reply("Done."))...)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Read the notes", Model: model, Tools: []string{"read_file"},
		Policy: workflows.Policy{ContextTokens: 1500}})

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Done.", res.Text)
	require.GreaterOrEqual(t, res.Compactions, 1)
	// r1..r4 once each: the script went on where it was after each summary.
	var ids []string
	for _, m := range res.Messages {
		for _, c := range m.ToolCalls {
			ids = append(ids, c.ID)
		}
	}
	require.Equal(t, []string{"r1", "r2", "r3", "r4"}, ids)
	require.NotEmpty(t, res.FullHead)
	require.Len(t, toolTexts(res.Messages), 4, "the result keeps every message")
	var summaries int
	for _, m := range res.Messages {
		if m.Role == results.RoleUser && strings.HasPrefix(m.Text(), compact.SummaryPrefix) {
			summaries++
		}
	}
	require.Zero(t, summaries, "the summary is the model's, not the people's, conversation")
	e.record(run)
}

// Compaction and continue-as-new together: the next run goes on from the
// compacted conversation and keeps counting compactions, and the script
// plays every reply once across the runs.
func TestCompactionSurvivesContinueAsNew(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "compaction_continued")
	require.NoError(t, os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte(strings.Repeat("a note. ", 250)), 0o600))
	const steps = 24
	replies := []scripted.Reply{}
	for i := 1; i <= steps; i++ {
		replies = append(replies, reply("", call(fmt.Sprintf("r%d", i), "read_file", map[string]string{"path": "notes.txt"})))
	}
	model := e.script(append(replies, reply("Done."))...)
	e.startWorker()
	run := e.start(workflows.Input{Prompt: "Read the notes", Model: model, Tools: []string{"read_file"}, MaxSteps: steps + 1,
		Policy: workflows.Policy{ContextTokens: 1500, MaxHistoryEvents: 250}})

	latest := e.latest(run)
	res := e.result(latest)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, "Done.", res.Text)
	var ids []string
	for _, m := range res.Messages {
		for _, c := range m.ToolCalls {
			ids = append(ids, c.ID)
		}
	}
	require.NotEmpty(t, ids)
	require.Equal(t, fmt.Sprintf("r%d", steps), ids[len(ids)-1], "the last run plays the script's last call")
	require.Greater(t, res.Compactions, steps/4, "compactions are counted across runs")
	require.NotEmpty(t, res.FullHead)
	s, err := state(context.Background(), e.caller, latest)
	require.NoError(t, err)
	require.GreaterOrEqual(t, s.Runs, 2)
	require.Equal(t, res.Compactions, s.Compactions)
	require.Equal(t, res.Usage, *s.Usage)
}
