package tollgate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/activities/builtin"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/grants"
	"github.com/tollgate-dev/tollgate/model/pricing"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/storage/blobstore"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/storage/payloadstore"
	"github.com/tollgate-dev/tollgate/storage/transcript"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// newActivities builds the activities and the stores they use, from
// options with their defaults filled in; transcripts and large tool
// outputs go to blobs.
// The caller has checked that the data directory and the workspace are
// apart (checkApart) before opening anything in either.
func newActivities(cfg Options, blobs *blobstore.Store) (*activities.Activities, error) {
	ws, err := workspace(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	conns := cfg.Connections
	if conns == nil {
		if conns, err = connections.NewFileStoreWith(datadir.Connections(cfg.DataDir), connections.FileStoreOptions{Sealer: connectionSealer(cfg.Codec)}); err != nil {
			return nil, fmt.Errorf("open connections store: %w", err)
		}
	}
	var tools []tool.Tool
	if !cfg.NoBuiltins {
		all, err := builtin.Tools(builtin.Options{Connections: conns, HTTPClient: cfg.HTTPClient, FetchAllow: cfg.FetchAllow, ShellEnv: cfg.ShellEnv, GitHubBaseURL: cfg.GitHubAPIURL})
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
	for _, src := range cfg.ToolSources {
		if err := registry.AddSource(src); err != nil {
			return nil, err
		}
	}
	router, err := providers.NewRouterWith(cfg.Models, cfg.Providers)
	if err != nil {
		return nil, err
	}
	prices, err := pricing.FromEnv()
	if err != nil {
		return nil, err
	}
	var cached int64
	if blobs.Dir() == "" {
		// A bucket: every chunk read is a round trip.
		cached = transcriptCacheBytes
	}
	convs := cfg.ConversationCacheBytes
	if convs == 0 {
		convs = conversationCacheBytes
	}
	// Every model call stores a chunk: its directory should be there.
	if err := blobs.Prepare(transcript.Space); err != nil {
		return nil, fmt.Errorf("tollgate: %w", err)
	}
	transcripts := transcript.New(blobs, transcript.Options{CacheBytes: cached, ConversationBytes: convs})
	outputs := payloadstore.NewDriver(blobs)
	return &activities.Activities{
		Tools:       registry,
		Models:      router,
		Transcripts: transcripts,
		Workspace:   ws,
		Outputs:     outputs,
		Prices:      prices,
		Events:      cfg.Events,
		Connections: conns,
	}, nil
}

// transcriptCacheBytes is how much of the conversations a worker on a
// remote blob store keeps in memory: some hundreds of long turns.
const transcriptCacheBytes = 64 << 20

// conversationCacheBytes is Options.ConversationCacheBytes' default: it
// bounds the long conversations (by their chunks' bytes) a worker keeps
// decoded, so that a turn's model call costs the same at its
// ten-thousandth call as at its tenth.
const conversationCacheBytes = 32 << 20

// checkApart refuses a data directory and a workspace that overlap, before
// either is created: the model must not read tokens or transcripts through
// the file tools.
func checkApart(cfg Options) error {
	if err := builtin.CheckApart(cfg.DataDir, cfg.Workspace); err != nil {
		return fmt.Errorf("tollgate: %w", err)
	}
	return nil
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

// register registers the workflows, as a deployment with features runs
// them, and the activities under their contract names. The delivery
// workflow's activity is the plugin's webhook deliverer's to register.
func register(r Registry, f workflows.Features, acts *activities.Activities) {
	r.RegisterWorkflowWithOptions(f.AgentTurn, workflow.RegisterOptions{Name: workflows.WorkflowName})
	r.RegisterWorkflowWithOptions(f.AgentSession, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
	r.RegisterWorkflowWithOptions(f.ListAgents, workflow.RegisterOptions{Name: workflows.ListAgentsName})
	if f.Webhooks {
		r.RegisterWorkflowWithOptions(workflows.DeliveryWorkflow, workflow.RegisterOptions{Name: workflows.DeliveryWorkflowName})
	}
	r.RegisterActivityWithOptions(acts.RunTool, activity.RegisterOptions{Name: activities.RunToolName})
	r.RegisterActivityWithOptions(acts.CallModel, activity.RegisterOptions{Name: activities.CallModelName})
	r.RegisterActivityWithOptions(acts.Compact, activity.RegisterOptions{Name: activities.CompactName})
	r.RegisterActivityWithOptions(acts.StoreTranscript, activity.RegisterOptions{Name: activities.StoreTranscriptName})
	r.RegisterActivityWithOptions(acts.DescribeTools, activity.RegisterOptions{Name: activities.DescribeToolsName})
	r.RegisterActivityWithOptions(acts.PreviewTool, activity.RegisterOptions{Name: activities.PreviewToolName})
	r.RegisterWorkflowWithOptions(workflows.GrantsWorkflow, workflow.RegisterOptions{Name: grants.WorkflowName})
	r.RegisterActivityWithOptions(acts.LookupGrants, activity.RegisterOptions{Name: activities.LookupGrantsName})
	r.RegisterActivityWithOptions(acts.AddGrant, activity.RegisterOptions{Name: activities.AddGrantName})
	// Local tool runs check that this worker holds the workspace a pinned
	// call needs (workflows/doc.go, "Workspace affinity").
	r.RegisterActivityWithOptions(activities.RunLocalTool(acts, f.WorkspaceQueue), activity.RegisterOptions{Name: activities.RunLocalToolName})
}

// WorkspaceQueue names the task queue of the worker with id workerID
// beside taskQueue: <taskQueue>/ws/<workerID>. Only that worker polls it,
// with RegisterWorkspace, so what is sent there runs where its workspace
// is.
func WorkspaceQueue(taskQueue, workerID string) string {
	return taskQueue + "/ws/" + workerID
}

// PinWorkspace says this plugin's workspace is its worker's own: turns its
// workers start send the calls of workspace tools (tool.Spec.Workspace:
// read_file, write_file, edit_file, list_dir, shell) to queue, which a
// worker of this process registered with RegisterWorkspace must poll.
// Call it before any worker with the plugin starts. Without it, as when
// every worker mounts one shared workspace, any worker runs any tool.
func (p *Plugin) PinWorkspace(queue string) error {
	if p.acts == nil {
		return fmt.Errorf("tollgate: a client plugin runs no tools, so it has no workspace to pin")
	}
	if queue == "" {
		return fmt.Errorf("tollgate: PinWorkspace needs a task queue name (see WorkspaceQueue)")
	}
	p.features.WorkspaceQueue = queue
	return nil
}

// ModelQueue names the task queue of one model provider's calls beside
// taskQueue: <taskQueue>/model/<provider>.
func ModelQueue(taskQueue, provider string) string {
	return taskQueue + "/model/" + provider
}

// RouteModelCalls sends the model calls of turns this plugin's workers
// start, for models of provider ("openai" for "openai:gpt-4.1"), to
// queue, so that the server's task-queue rate limit
// (worker.Options.TaskQueueActivitiesPerSecond on the workers polling
// it) caps that provider's calls across every worker. A worker of this
// process registered with RegisterModelCalls must poll queue. Call it
// before any worker with the plugin starts, the same on every worker of
// the fleet.
func (p *Plugin) RouteModelCalls(provider, queue string) error {
	if p.acts == nil {
		return fmt.Errorf("tollgate: a client plugin calls no models, so it has no model calls to route")
	}
	if provider == "" || strings.ContainsAny(provider, ": ") || queue == "" {
		return fmt.Errorf("tollgate: RouteModelCalls needs a provider prefix without ':' or spaces and a task queue (got %q, %q)", provider, queue)
	}
	if p.features.ModelQueues == nil {
		p.features.ModelQueues = map[string]string{}
	}
	p.features.ModelQueues[provider] = queue
	return nil
}

// RegisterModelCalls registers on r only the CallModel activity and
// Compact, whose summaries are model calls too. Give it
// a worker of its own on a queue passed to RouteModelCalls, with
// worker.Options.DisableWorkflowWorker set and the provider's limits.
func (p *Plugin) RegisterModelCalls(r Registry) {
	if p.acts == nil {
		return
	}
	r.RegisterActivityWithOptions(p.acts.CallModel, activity.RegisterOptions{Name: activities.CallModelName})
	r.RegisterActivityWithOptions(p.acts.Compact, activity.RegisterOptions{Name: activities.CompactName})
}

// RegisterWorkspace registers on r only what a workspace queue runs: the
// RunTool and PreviewTool activities of this plugin's tools. Give it a
// worker of its own on the queue passed to PinWorkspace, with
// worker.Options.DisableWorkflowWorker set.
func (p *Plugin) RegisterWorkspace(r Registry) {
	if p.acts == nil {
		return
	}
	r.RegisterActivityWithOptions(p.acts.RunTool, activity.RegisterOptions{Name: activities.RunToolName})
	r.RegisterActivityWithOptions(p.acts.PreviewTool, activity.RegisterOptions{Name: activities.PreviewToolName})
}

// registerReplayer registers the workflows a replayer replays. Their
// features come from the recorded history, so none are given here.
func registerReplayer(r Registry) {
	r.RegisterWorkflowWithOptions(workflows.AgentTurn, workflow.RegisterOptions{Name: workflows.WorkflowName})
	r.RegisterWorkflowWithOptions(workflows.AgentSession, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
	r.RegisterWorkflowWithOptions(workflows.GrantsWorkflow, workflow.RegisterOptions{Name: grants.WorkflowName})
}

// workspace resolves the workspace to an absolute, symlink-free path and
// creates it if missing, so confinement checks compare like with like.
func workspace(dir string) (string, error) {
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
