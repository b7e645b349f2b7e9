package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/gateway"
)

// Without TOLLGATE_BLOB_URL, inbox sessions live in the data directory,
// where a restarted gateway (with the same session secret) finds them.
func TestSessionsLiveInTheDataDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rec := gateway.SessionRecord{Key: "abc", Expires: time.Now().Add(time.Hour)}
	store, closeStore, err := openSessions(ctx, dir, time.Hour, func(string) string { return "" })
	require.NoError(t, err)
	require.NoError(t, store.Create(ctx, "s1", rec))
	closeStore()

	store, closeStore, err = openSessions(ctx, dir, time.Hour, func(string) string { return "" })
	require.NoError(t, err)
	defer closeStore()
	got, ok, err := store.Lookup(ctx, "s1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "abc", got.Key)
	require.NoError(t, store.End(ctx, "s1"))
	_, ok, err = store.Lookup(ctx, "s1")
	require.NoError(t, err)
	require.False(t, ok, "ended")
	require.NoError(t, store.End(ctx, "s1"), "ending twice is no error")
}
