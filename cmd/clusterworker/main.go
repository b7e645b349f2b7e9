// Command clusterworker is the worker the cluster test runs twice: a
// Tollgate worker built the way a user builds one, from the public API
// (tollgate.NewPlugin and the SDK's worker), with the test tools of
// package cluster beside the built-ins. It serves until it is signalled
// or killed.
//
// Configuration is the environment a real deployment uses:
// TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TOLLGATE_TASK_QUEUE,
// TOLLGATE_DATA, TOLLGATE_WORKSPACE, TOLLGATE_BLOB_URL,
// TOLLGATE_SCRIPTS_DIR, TOLLGATE_NATS_URL (live events; unset publishes
// none); and the test's CLUSTER_LEDGER and CLUSTER_WORKER
// (the name ledger entries carry).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/tests/cluster"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/stream"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "clusterworker:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	name := os.Getenv("CLUSTER_WORKER")
	ledger := &cluster.Ledger{Path: os.Getenv("CLUSTER_LEDGER"), Worker: name}
	if ledger.Path == "" || name == "" {
		return fmt.Errorf("CLUSTER_LEDGER and CLUSTER_WORKER must be set")
	}
	tools, err := cluster.Tools(ledger)
	if err != nil {
		return err
	}
	models, err := providers.LoadConfigFromEnv()
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := tollgate.Options{
		DataDir:          os.Getenv("TOLLGATE_DATA"),
		Workspace:        os.Getenv("TOLLGATE_WORKSPACE"),
		Models:           models,
		Tools:            tools,
		SearchAttributes: true,
	}
	if url := os.Getenv("TOLLGATE_NATS_URL"); url != "" {
		events, err := stream.Connect(stream.Config{URL: url, Logger: logger, Name: "tollgate-clusterworker-" + name})
		if err != nil {
			return fmt.Errorf("connect to NATS for live events: %w", err)
		}
		defer events.Close()
		opts.Events = events
	}
	plugin, err := tollgate.NewPlugin(opts)
	if err != nil {
		return err
	}
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  os.Getenv("TEMPORAL_ADDRESS"),
		Namespace: os.Getenv("TEMPORAL_NAMESPACE"),
		Logger:    sdklog.NewStructuredLogger(logger),
		Plugins:   []client.Plugin{plugin},
	})
	if err != nil {
		return fmt.Errorf("dial Temporal: %w", err)
	}
	defer c.Close()
	tq := os.Getenv("TOLLGATE_TASK_QUEUE")
	if tq == "" {
		tq = tollgate.DefaultTaskQueue
	}
	w := worker.New(c, tq, worker.Options{})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start the worker: %w", err)
	}
	defer w.Stop()
	// The test waits for this line before it counts the worker as up.
	fmt.Fprintf(os.Stderr, "clusterworker %s ready (pid %d)\n", name, os.Getpid())
	<-ctx.Done()
	return nil
}
