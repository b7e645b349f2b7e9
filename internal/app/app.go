// Package app assembles a Tollgate worker: the tool registry, the model
// router, the stores in the data directory, and the registration of the
// workflow and activities. The worker binary, the integration tests, the
// history recorder and the benchmarks all build workers through it, so
// they run exactly what production runs.
package app

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/activities/builtin"
	"github.com/tollgate-dev/tollgate/activities/connections"
	"github.com/tollgate-dev/tollgate/activities/model/providers"
	"github.com/tollgate-dev/tollgate/activities/tool"
	"github.com/tollgate-dev/tollgate/activities/transcript"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Config is what a worker's activities need.
type Config struct {
	// DataDir holds transcripts, connections and stored payloads.
	DataDir string
	// Workspace confines the file and shell tools.
	Workspace string
	Models    providers.Config
	// Extra tools are registered beside the built-in ones.
	Extra []tool.Tool
	// NoBuiltins leaves the built-in tools out (tests and benchmarks).
	NoBuiltins bool
	// Connections overrides the file store in the data directory.
	Connections connections.Store
	HTTPClient  *http.Client
}

// NewActivities builds the activities and the stores they use.
func NewActivities(cfg Config) (*activities.Activities, error) {
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("app: no data directory")
	}
	ws, err := workspace(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	conns := cfg.Connections
	if conns == nil {
		if conns, err = connections.NewFileStore(filepath.Join(cfg.DataDir, "connections")); err != nil {
			return nil, fmt.Errorf("open connections store: %w", err)
		}
	}
	var tools []tool.Tool
	if !cfg.NoBuiltins {
		if tools, err = builtin.Tools(builtin.Options{Connections: conns, HTTPClient: cfg.HTTPClient}); err != nil {
			return nil, err
		}
	}
	registry, err := tool.NewRegistry(append(tools, cfg.Extra...)...)
	if err != nil {
		return nil, err
	}
	transcripts, err := transcript.NewStore(filepath.Join(cfg.DataDir, "transcripts"))
	if err != nil {
		return nil, err
	}
	return &activities.Activities{
		Tools:       registry,
		Models:      providers.NewRouter(cfg.Models),
		Transcripts: transcripts,
		Workspace:   ws,
	}, nil
}

// Register registers the AgentTurn workflow and the activities under their
// contract names.
func Register(r worker.Registry, acts *activities.Activities) {
	r.RegisterWorkflowWithOptions(workflows.AgentTurn, workflow.RegisterOptions{Name: workflows.WorkflowName})
	r.RegisterActivityWithOptions(acts.RunTool, activity.RegisterOptions{Name: activities.RunToolName})
	r.RegisterActivityWithOptions(acts.CallModel, activity.RegisterOptions{Name: activities.CallModelName})
	r.RegisterActivityWithOptions(acts.DescribeTools, activity.RegisterOptions{Name: activities.DescribeToolsName})
}

// workspace resolves the workspace to an absolute, symlink-free path and
// creates it if missing, so confinement checks compare like with like.
func workspace(dir string) (string, error) {
	if dir == "" {
		dir = "workspace"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create workspace %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve workspace %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolve workspace %s: %w", dir, err)
	}
	return real, nil
}
