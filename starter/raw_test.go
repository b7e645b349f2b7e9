package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/storage/payloadstore"
	"github.com/tollgate-dev/tollgate/workflows"
)

func TestRawPrintsStoredInlineAndPlainOutputs(t *testing.T) {
	data := t.TempDir()
	store, err := payloadstore.New(datadir.Payloads(data))
	require.NoError(t, err)
	whole := strings.Repeat("line of output\n", 10000)
	ref, err := store.PutRaw(context.Background(), whole)
	require.NoError(t, err)

	succeeded := func(id string, out results.Success) results.Card {
		return results.Card{CallID: id, Tool: "shell", State: results.StateSucceeded, Output: &out}
	}
	fake := newFake(workflows.State{Status: workflows.StatusCompleted, Cards: []results.Card{
		succeeded("stored", results.Success{Parts: []results.Part{results.TextPart("line of\n[truncated]")}, Truncated: true, RawRef: ref}),
		succeeded("inline", results.Success{Parts: []results.Part{results.TextPart("ab\n[truncated]")}, Truncated: true, Raw: "abcdef"}),
		succeeded("plain", results.Success{Parts: []results.Part{results.TextPart("all of it")}}),
		{CallID: "waiting", Tool: "shell", State: results.StatePendingApproval},
	}})
	h := newHarness(t, fake)
	h.env["TOLLGATE_DATA"] = data

	for id, want := range map[string]string{"stored": whole, "inline": "abcdef", "plain": "all of it"} {
		o := h.run("", "raw", "turn-1", id)
		require.Equal(t, 0, o.code, o.stderr)
		require.Equal(t, want, o.stdout, id)
	}

	o := h.run("", "raw", "turn-1", "waiting")
	require.Equal(t, 1, o.code)
	require.Contains(t, o.stderr, "call waiting has no output: it is pending_approval")
	o = h.run("", "raw", "turn-1", "nope")
	require.Contains(t, o.stderr, `turn turn-1 has no call "nope"`)

	h.env["TOLLGATE_DATA"] = t.TempDir() + "/elsewhere"
	o = h.run("", "raw", "turn-1", "stored")
	require.Equal(t, 1, o.code)
	require.Contains(t, o.stderr, "there is no output store at")
	require.NoDirExists(t, h.env["TOLLGATE_DATA"], "reading must not create a data directory")
}
