package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/blobstore"
	"github.com/tollgate-dev/tollgate/workflows"
)

// A turn whose state is larger than history takes is read by a starter
// with another data directory than the worker's: the error says so and
// what to do, where the SDK would only say a blob is missing.
func TestStateOfALargeTurnFromAnotherDataDirectorySaysWhatToDo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	t.Setenv(blobstore.EnvVar, "")
	srv := temporaltest.NewServer(temporaltest.WithT(t))
	workerData, scripts := t.TempDir(), t.TempDir()
	args, err := json.Marshal(map[string]string{"path": "big.md", "content": strings.Repeat("x", 150<<10)})
	require.NoError(t, err)
	script, err := json.Marshal(scripted.Script{Replies: []scripted.Reply{{ToolCalls: []scripted.ToolCall{{ID: "w1", Name: "write_file", Arguments: args}}}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(scripts, "big.json"), script, 0o600))

	ext, err := clientconfig.ExternalStorage(workerData)
	require.NoError(t, err)
	c, err := client.Dial(client.Options{HostPort: srv.GetFrontendHostPort(), Namespace: srv.GetDefaultNamespace(), ExternalStorage: ext})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	plugin, err := tollgate.NewPlugin(tollgate.Options{DataDir: workerData, Workspace: t.TempDir(), Models: providers.Config{ScriptDir: scripts}})
	require.NoError(t, err)
	w := worker.New(c, "big", worker.Options{Plugins: []worker.Plugin{plugin}})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "big-turn", TaskQueue: "big"}, workflows.WorkflowName,
		workflows.Input{Prompt: "Write it", Model: "scripted:big.json", Tools: []string{"write_file"}})
	require.NoError(t, err)

	dial := func(dataDir string) turns {
		tt, err := dialTemporal(ctx, globals{address: srv.GetFrontendHostPort(), namespace: srv.GetDefaultNamespace(), dataDir: dataDir})
		require.NoError(t, err)
		t.Cleanup(tt.Close)
		return tt
	}
	// The control: with the worker's data directory the state reads.
	same := dial(workerData)
	require.Eventually(t, func() bool {
		s, err := same.State(ctx, "big-turn", "")
		return err == nil && len(s.Cards) == 1 && s.Cards[0].State == results.StatePendingApproval
	}, 30*time.Second, 50*time.Millisecond)

	other := t.TempDir()
	_, err = dial(other).State(ctx, "big-turn", "")
	require.ErrorIs(t, err, blobstore.ErrMissing)
	require.ErrorContains(t, err, "cannot query the state big-turn: the worker stored part of it")
	require.ErrorContains(t, err, "this starter's data directory "+other+" does not hold it")
	require.ErrorContains(t, err, "run the starter with the worker's --data (TOLLGATE_DATA), or give the worker and the starter the same TOLLGATE_BLOB_URL")
}
