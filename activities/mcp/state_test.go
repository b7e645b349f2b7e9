package mcp

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFileStatesKeepACallsAnswersPrivately(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mcp")
	s, err := newFileStates(dir, time.Hour)
	require.NoError(t, err)
	ctx := context.Background()
	k := callKey{Execution: "run-1", Turn: "turn/../x", Call: "call 1"}
	st := callState{Version: stateVersion, callKey: k, Tool: "t.ask", Asked: 1,
		Answers: []storedAnswer{{Question: "q1", Action: "accept", Content: map[string]any{"a": "b"}}},
		Pending: &question{ID: "q2", Kind: kindConfirm}}
	require.NoError(t, s.save(ctx, st))

	got, ok, err := s.load(ctx, k)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, st.Answers, got.Answers)
	require.Equal(t, "q2", got.Pending.ID)
	_, ok, err = s.load(ctx, callKey{Execution: "run-1", Turn: "turn/../x", Call: "call 2"})
	require.NoError(t, err)
	require.False(t, ok)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "ids become a hash, never a path")
	info, err := entries[0].Info()
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	// A record nobody asked for within the age is pruned at the next open.
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(dir, entries[0].Name()), old, old))
	s, err = newFileStates(dir, time.Hour)
	require.NoError(t, err)
	_, ok, err = s.load(ctx, k)
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, s.save(ctx, st))
	require.NoError(t, s.remove(ctx, k))
	require.NoError(t, s.remove(ctx, k), "removing twice is fine")
}
