package tollgate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/devserver"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Once RegisterSearchAttributes returns, a workflow task that writes them
// completes the first time: none fails BadSearchAttributes while the
// server's services catch up with what it just registered.
func TestRegisteredSearchAttributesAreUsableOnReturn(t *testing.T) {
	c := startDevServer(t, devserver.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	require.NoError(t, tollgate.RegisterSearchAttributes(ctx, c, "default"))
	t.Logf("registered and usable in %v", time.Since(began).Round(time.Millisecond))
	requireUpsertsTakeAtOnce(t, c)
}

// The dev server creates its namespace with the search attributes, so
// they are usable from its first workflow task and nothing need wait.
func TestDevServerStartsWithTheSearchAttributes(t *testing.T) {
	c := startDevServer(t, devserver.Options{SearchAttributes: workflows.SearchAttributes()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	missing, err := tollgate.MissingSearchAttributes(ctx, c, "default")
	require.NoError(t, err)
	require.Empty(t, missing)
	requireUpsertsTakeAtOnce(t, c)
}

func startDevServer(t *testing.T, opts devserver.Options) client.Client {
	t.Helper()
	port, err := devserver.FreePort()
	require.NoError(t, err)
	opts.Port = port
	srv, err := devserver.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(client.Options{HostPort: srv.Address()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// upsertAll writes every Tollgate search attribute, as turns and sessions
// do.
func upsertAll(ctx workflow.Context) error {
	return workflow.UpsertTypedSearchAttributes(ctx,
		workflows.StatusAttr.ValueSet(string(workflows.StatusRunning)),
		workflows.UserAttr.ValueSet("ann"),
		workflows.SessionAttr.ValueSet("s"),
		workflows.WaitingCallsAttr.ValueSet([]string{"c1"}),
		workflows.WaitingToolsAttr.ValueSet([]string{"write_file"}))
}

// requireUpsertsTakeAtOnce runs upsertAll at once and requires that no
// workflow task of it failed.
func requireUpsertsTakeAtOnce(t *testing.T, c client.Client) {
	t.Helper()
	const queue = "upserts"
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(upsertAll, workflow.RegisterOptions{Name: "UpsertAll"})
	require.NoError(t, w.Start())
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "upsert-all", TaskQueue: queue}, "UpsertAll")
	require.NoError(t, err)
	require.NoError(t, run.Get(ctx, nil))
	var failed []string
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil {
			failed = append(failed, fmt.Sprintf("%s: %s", a.GetCause(), a.GetFailure().GetMessage()))
		}
	}
	require.Empty(t, failed, "workflow tasks failed")
}
