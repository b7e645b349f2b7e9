package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
)

// validWorkerID keeps a worker id usable in a task queue name and in logs.
var validWorkerID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// startWorkspaceWorker gives this worker's workspace a task queue of its
// own, <task queue>/ws/<worker id>, polled by a second worker that runs
// only RunTool and PreviewTool; turns this worker starts send their file
// and shell calls there (workflows/doc.go, "Workspace affinity"). With
// --shared-workspace every worker sees the same files, so nothing is
// pinned and any worker runs any call. The returned func stops it.
func startWorkspaceWorker(c client.Client, plugin *tollgate.Plugin, f flags, logger *slog.Logger) (func(), error) {
	if f.sharedWorkspace {
		logger.Info("Workspace shared: any worker runs file and shell tools")
		return func() {}, nil
	}
	id := f.workerID
	if id == "" {
		id = defaultWorkerID(plugin.Workspace())
	}
	if !validWorkerID.MatchString(id) {
		return nil, fmt.Errorf("--worker-id %q must be 1-100 letters, digits, '.', '_' or '-'", id)
	}
	queue := tollgate.WorkspaceQueue(f.taskQueue, id)
	if err := plugin.PinWorkspace(queue); err != nil {
		return nil, err
	}
	w := worker.New(c, queue, worker.Options{DisableWorkflowWorker: true})
	plugin.RegisterWorkspace(w)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start the workspace worker on %s: %w", queue, err)
	}
	logger.Info("Workspace tools of this worker's turns run here", "worker_id", id, "task_queue", queue)
	return w.Stop, nil
}

// defaultWorkerID names a worker by its host and workspace: stable across
// restarts (a restarted worker picks up its pinned calls again), distinct
// for two workers on one host with different workspaces. The workspace
// path is hashed so that it is not written into histories.
func defaultWorkerID(workspace string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			return r
		}
		return '-'
	}, host)
	if len(host) > 80 {
		host = host[:80]
	}
	sum := sha256.Sum256([]byte(workspace))
	return host + "-" + hex.EncodeToString(sum[:4])
}

// envBool reads a boolean environment variable; unset or unreadable is
// false.
func envBool(k string) bool {
	v, _ := strconv.ParseBool(os.Getenv(k))
	return v
}
