package tollgate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/activities/builtin"
	"github.com/tollgate-dev/tollgate/activities/connections"
	"github.com/tollgate-dev/tollgate/activities/model/providers"
	"github.com/tollgate-dev/tollgate/activities/tool"
	"github.com/tollgate-dev/tollgate/activities/transcript"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/storage/payloadstore"
	"github.com/tollgate-dev/tollgate/workflows"
)

// newActivities builds the activities and the stores they use.
func newActivities(cfg Options) (*activities.Activities, error) {
	if err := separate(cfg.DataDir, workspaceDir(cfg.Workspace)); err != nil {
		return nil, err
	}
	ws, err := workspace(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	conns := cfg.Connections
	if conns == nil {
		if conns, err = connections.NewFileStore(datadir.Connections(cfg.DataDir)); err != nil {
			return nil, fmt.Errorf("open connections store: %w", err)
		}
	}
	var tools []tool.Tool
	if !cfg.NoBuiltins {
		all, err := builtin.Tools(builtin.Options{Connections: conns, HTTPClient: cfg.HTTPClient, FetchAllow: cfg.FetchAllow, ShellEnv: cfg.ShellEnv})
		if err != nil {
			return nil, err
		}
		if tools, err = selectBuiltins(all, cfg.Builtins); err != nil {
			return nil, err
		}
	}
	registry, err := tool.NewRegistry(append(tools, cfg.Tools...)...)
	if err != nil {
		return nil, err
	}
	router, err := providers.NewRouterWith(cfg.Models, cfg.Providers)
	if err != nil {
		return nil, err
	}
	transcripts, err := transcript.NewStore(datadir.Transcripts(cfg.DataDir))
	if err != nil {
		return nil, err
	}
	outputs, err := payloadstore.New(datadir.Payloads(cfg.DataDir))
	if err != nil {
		return nil, err
	}
	return &activities.Activities{
		Tools:       registry,
		Models:      router,
		Transcripts: transcripts,
		Workspace:   ws,
		Outputs:     outputs,
	}, nil
}

// selectBuiltins keeps the built-in tools named in names; nil keeps all.
func selectBuiltins(all []tool.Tool, names []string) ([]tool.Tool, error) {
	if names == nil {
		return all, nil
	}
	byName := map[string]tool.Tool{}
	var available []string
	for _, t := range all {
		byName[t.Spec().Name] = t
		available = append(available, t.Spec().Name)
	}
	out := make([]tool.Tool, 0, len(names))
	for _, n := range names {
		t, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("tollgate: no built-in tool %q; the built-ins are %s", n, strings.Join(available, ", "))
		}
		out = append(out, t)
	}
	return out, nil
}

// register registers the AgentTurn workflow and, unless acts is nil (a
// replayer), the activities under their contract names.
func register(r Registry, acts *activities.Activities) {
	r.RegisterWorkflowWithOptions(workflows.AgentTurn, workflow.RegisterOptions{Name: workflows.WorkflowName})
	if acts == nil {
		return
	}
	r.RegisterActivityWithOptions(acts.RunTool, activity.RegisterOptions{Name: activities.RunToolName})
	r.RegisterActivityWithOptions(acts.CallModel, activity.RegisterOptions{Name: activities.CallModelName})
	r.RegisterActivityWithOptions(acts.DescribeTools, activity.RegisterOptions{Name: activities.DescribeToolsName})
}

// workspace resolves the workspace to an absolute, symlink-free path and
// creates it if missing, so confinement checks compare like with like.
func workspace(dir string) (string, error) {
	dir = workspaceDir(dir)
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

// workspaceDir is the workspace a Config names, with the default filled in.
func workspaceDir(dir string) string {
	if dir == "" {
		return "workspace"
	}
	return dir
}

// separate refuses a data directory and a workspace that overlap. The
// file tools hand the model anything in the workspace without approval,
// and the data directory holds the connection tokens and every
// conversation's transcript; a workspace inside the data directory sits
// beside them and could become a store's directory. Both are compared
// after resolving symbolic links and, for parts that already exist, by
// identity, so "." against ".tollgate", an alias through a link, or a
// case-insensitive file system cannot hide an overlap. Runs before
// either directory is created.
func separate(dataDir, ws string) error {
	data, err := resolveExisting(dataDir)
	if err != nil {
		return fmt.Errorf("tollgate: resolve data directory %s: %w", dataDir, err)
	}
	work, err := resolveExisting(ws)
	if err != nil {
		return fmt.Errorf("tollgate: resolve workspace %s: %w", ws, err)
	}
	d, w := show(dataDir, data), show(ws, work)
	const fix = "set --data (TOLLGATE_DATA) and --workspace (TOLLGATE_WORKSPACE) to separate directories side by side, " +
		"as the defaults .tollgate and workspace are"
	switch {
	case sameDir(data, work):
		return fmt.Errorf("tollgate: the data directory %s and the workspace %s are the same directory, "+
			"so the file tools would hand the model the connection tokens and transcripts stored there; %s", d, w, fix)
	case contains(work, data):
		return fmt.Errorf("tollgate: the data directory %s is inside the workspace %s, "+
			"so the file tools would hand the model the connection tokens and transcripts stored in it; %s", d, w, fix)
	case contains(data, work):
		return fmt.Errorf("tollgate: the workspace %s is inside the data directory %s, "+
			"beside the connection tokens and transcripts the file tools must never reach; %s", w, d, fix)
	}
	return nil
}

// show names a directory as the operator gave it and, when that differs,
// as it resolved.
func show(given, resolved string) string {
	if filepath.Clean(given) == resolved {
		return resolved
	}
	return fmt.Sprintf("%s (%s)", given, resolved)
}

// resolveExisting makes dir absolute and resolves the symbolic links of
// its longest existing prefix; the rest, not created yet, cannot hold one.
func resolveExisting(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	existing, rest := abs, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	return filepath.Join(real, rest), nil
}

// contains reports whether inner is below outer (not equal to it): by
// name, or because one of inner's existing ancestors is outer itself.
func contains(outer, inner string) bool {
	for p := filepath.Dir(inner); ; p = filepath.Dir(p) {
		if sameDir(p, outer) {
			return true
		}
		if filepath.Dir(p) == p {
			return false
		}
	}
}

// sameDir reports whether a and b are one directory: equal names, or
// both existing and the same file (which catches case-insensitive file
// systems and bind mounts).
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ai, err := os.Stat(a)
	if err != nil {
		return false
	}
	bi, err := os.Stat(b)
	return err == nil && os.SameFile(ai, bi)
}
