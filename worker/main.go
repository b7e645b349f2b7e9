// Command worker runs a Tollgate worker: the AgentTurn workflow and the
// RunTool, CallModel and DescribeTools activities. With --dev it first
// starts an embedded Temporal server whose SQLite database lives in the
// data directory, so parked turns survive a restart of the whole process.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	serverlog "go.temporal.io/server/common/log"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/activities/builtin"
	"github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/agents"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
	"github.com/tollgate-dev/tollgate/internal/devserver"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/workflows"
)

type flags struct {
	dev       bool
	devPort   int
	uiPort    int
	address   string
	namespace string
	profile   string
	taskQueue string
	workspace string
	dataDir   string
	logLevel  string
	// gatewayAddr is where --dev serves the HTTP gateway; empty: nowhere.
	gatewayAddr string
	// searchAttributes is auto (use them when the server has them), on
	// or off.
	searchAttributes string
	// dieWithParent is set by `make run`; see parent_linux.go.
	dieWithParent bool
	// mcpConfig names the MCP servers whose tools the worker offers.
	mcpConfig string
	// agentsFile names the agents file (--agents, TOLLGATE_AGENTS).
	agentsFile string
	// oauthProviders names the OAuth providers file.
	oauthProviders string
	// oauthRedirectBase is the gateway's public URL, for MCP's
	// authorization flow.
	oauthRedirectBase string
	// workerID and sharedWorkspace: see affinity.go.
	workerID        string
	sharedWorkspace bool
	// metricsAddr is where /metrics is served; empty: nowhere.
	metricsAddr string
	// allowRootShell offers the shell tool on a root worker; see
	// rootshell.go.
	allowRootShell bool
	// natsURL is where live events go (events.go).
	natsURL string
	// policy names the approval rules file (docs/approvals.md).
	policy string
	// devKeys asks the dev gateway for keys of named people with groups.
	devKeys string
}

func main() {
	var f flags
	flag.BoolVar(&f.dev, "dev", false, "start an embedded Temporal server (SQLite in the data directory) before the worker")
	flag.IntVar(&f.devPort, "dev-port", 7233, "frontend port of the embedded server")
	flag.IntVar(&f.uiPort, "ui-port", 8233, "port of the Temporal Web UI with --dev (0 disables it)")
	flag.StringVar(&f.address, "address", "", "Temporal frontend host:port (default TEMPORAL_ADDRESS or 127.0.0.1:7233)")
	flag.StringVar(&f.namespace, "namespace", "", "Temporal namespace (default TEMPORAL_NAMESPACE or default)")
	flag.StringVar(&f.profile, "profile", "", "temporal.toml profile (default TEMPORAL_PROFILE or default)")
	flag.StringVar(&f.taskQueue, "task-queue", envOr("TOLLGATE_TASK_QUEUE", workflows.DefaultTaskQueue), "task queue (TOLLGATE_TASK_QUEUE)")
	flag.StringVar(&f.workspace, "workspace", envOr("TOLLGATE_WORKSPACE", "workspace"), "directory the file and shell tools are confined to (TOLLGATE_WORKSPACE)")
	flag.StringVar(&f.dataDir, "data", datadir.FromEnv(os.Getenv), "data directory: stored payloads, transcripts, connections, the dev database (TOLLGATE_DATA)")
	flag.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	flag.StringVar(&f.natsURL, "nats-url", os.Getenv("TOLLGATE_NATS_URL"), "NATS `url` for turns' live events (TOLLGATE_NATS_URL); with --dev and none, a NATS server runs in this process")
	flag.StringVar(&f.gatewayAddr, "gateway-addr", "127.0.0.1:8080", "with --dev, where the HTTP gateway and inbox listen (loopback only; empty turns it off)")
	flag.StringVar(&f.searchAttributes, "search-attributes", "auto", "keep Tollgate's search attributes current: auto (when the server has them), on, off")
	flag.BoolVar(&f.dieWithParent, "die-with-parent", false, "exit when the parent process dies (Linux; used by make run)")
	flag.StringVar(&f.policy, "policy", os.Getenv("TOLLGATE_POLICY"), "approval rules `file` (YAML or JSON; TOLLGATE_POLICY), checked against every tool's argument schema at start")
	flag.StringVar(&f.devKeys, "dev-keys", os.Getenv("TOLLGATE_DEV_KEYS"), "with --dev, more gateway keys: comma-separated `NAME[:GROUP+GROUP]`, e.g. lena:leads,lars:leads,eve; each answers as NAME with its groups, and its key is printed at start (TOLLGATE_DEV_KEYS)")
	flag.StringVar(&f.mcpConfig, "mcp", os.Getenv("TOLLGATE_MCP_CONFIG"), "MCP servers `file` (JSON) whose tools the worker offers as <server>.<tool> (TOLLGATE_MCP_CONFIG)")
	flag.StringVar(&f.agentsFile, "agents", os.Getenv(agents.Env), "agents `file` (YAML or JSON): named agents turns and sessions run by name, call as tools and hand off to ("+agents.Env+")")
	flag.StringVar(&f.oauthProviders, "oauth-providers", os.Getenv("TOLLGATE_OAUTH_PROVIDERS"), "OAuth providers `file` (JSON): tokens are refreshed before tools run, and with --dev the gateway runs the connect flow (TOLLGATE_OAUTH_PROVIDERS)")
	flag.StringVar(&f.oauthRedirectBase, "oauth-redirect-base", os.Getenv("TOLLGATE_OAUTH_REDIRECT_BASE"), "the gateway's public base `URL`: turns on MCP's authorization flow, so an MCP server that answers 401 gets a connect link to its own authorization server (TOLLGATE_OAUTH_REDIRECT_BASE; with --dev, the dev gateway's address)")
	flag.StringVar(&f.workerID, "worker-id", os.Getenv("TOLLGATE_WORKER_ID"), "this worker's `id`: its turns' file and shell calls run on task queue <task-queue>/ws/<id> (TOLLGATE_WORKER_ID; default host name and a hash of the workspace path)")
	flag.BoolVar(&f.sharedWorkspace, "shared-workspace", envBool("TOLLGATE_SHARED_WORKSPACE"), "every worker sees the same workspace, so any worker runs file and shell calls (TOLLGATE_SHARED_WORKSPACE)")
	flag.StringVar(&f.metricsAddr, "metrics", os.Getenv("TOLLGATE_METRICS_ADDR"), "serve Prometheus metrics at http://`host:port`/metrics, e.g. 127.0.0.1:9464 (TOLLGATE_METRICS_ADDR; off when empty)")
	flag.BoolVar(&f.allowRootShell, "allow-root-shell", envBool(allowRootShellEnv), "offer the shell tool even when the worker runs as root, whose commands can read the worker's environment ("+allowRootShellEnv+")")
	flag.Parse()

	logger := newLogger(f.logLevel)
	if err := run(f, logger); err != nil {
		logger.Error("Worker stopped", "error", err)
		os.Exit(1)
	}
}

func run(f flags, logger *slog.Logger) error {
	var uiURL string
	if err := protectEnviron(); err != nil {
		return err
	}
	if f.dieWithParent {
		if err := dieWithParent(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory %s: %w", f.dataDir, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Read before the embedded server starts, so a bad configuration (a
	// workspace overlapping the data directory, say) stops nothing.
	models, err := providers.LoadConfigFromEnv()
	if err != nil {
		return err
	}
	hooks, err := webhook.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if err := builtin.CheckApart(f.dataDir, f.workspace); err != nil {
		return err
	}
	var rules []policy.Rule
	if f.policy != "" {
		// Read before any server starts: a bad file stops the worker at
		// once. The rules are checked against the tools in NewPlugin.
		if rules, err = policy.Load(f.policy); err != nil {
			return err
		}
		if err := policy.Check(rules); err != nil {
			return fmt.Errorf("tollgate: approval rules in %s: %w", f.policy, err)
		}
	}
	people, err := parseDevKeys(f.devKeys)
	if err != nil {
		return err
	}
	if len(people) > 0 && (!f.dev || f.gatewayAddr == "") {
		return fmt.Errorf("--dev-keys makes keys for the dev gateway, which runs only with --dev and a --gateway-addr")
	}
	var mcpConfig mcp.Config
	if f.mcpConfig != "" {
		if mcpConfig, err = mcp.LoadConfig(f.mcpConfig); err != nil {
			return err
		}
	}
	var named []workflows.Agent
	if f.agentsFile != "" {
		if named, err = agents.Load(f.agentsFile); err != nil {
			return err
		}
	}
	switch f.searchAttributes {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("--search-attributes is %q; it takes auto, on or off", f.searchAttributes)
	}

	if f.dev {
		db := filepath.Join(f.dataDir, "temporal.db")
		srv, err := devserver.Start(devserver.Options{
			DatabasePath: db, Port: f.devPort, Logger: serverLogger(logger),
			DynamicConfig: devserver.DevDynamicConfig(), SearchAttributes: workflows.SearchAttributes(),
		})
		if err != nil {
			return fmt.Errorf("start the embedded Temporal server: %w", err)
		}
		defer func() {
			if err := srv.Stop(); err != nil {
				logger.Warn("Embedded server did not stop cleanly", "error", err)
			}
		}()
		f.address = srv.Address()
		logger.Info("Embedded Temporal server started", "address", srv.Address(), "database", db)
		if f.uiPort != 0 {
			codecSrv, err := startDevCodec(f.uiPort, logger)
			if err != nil {
				return err
			}
			defer codecSrv.Stop()
			ui, err := devserver.StartUI(devserver.UIOptions{Port: f.uiPort, TemporalAddress: srv.Address(), CodecEndpoint: codecSrv.Endpoint()})
			if err != nil {
				return fmt.Errorf("start the Temporal Web UI: %w", err)
			}
			defer ui.Stop()
			uiURL = ui.URL()
		}
	}

	obs, err := startTelemetry(ctx, f.metricsAddr, logger)
	if err != nil {
		return err
	}
	defer obs.Stop()
	c, err := clientconfig.Dial(ctx, clientconfig.Options{
		DataDir: f.dataDir, Profile: f.profile, Address: f.address, Namespace: f.namespace, Logger: logger,
		MetricsHandler: obs.metrics,
	})
	if err != nil {
		return err
	}
	defer c.Close()

	if f.dev {
		// The embedded server is ours to configure. A new database has the
		// search attributes from the start; one from before them gets
		// them here, and the worker polls only once the server takes them.
		if err := tollgate.RegisterSearchAttributes(ctx, c, nsOr(f.namespace)); err != nil {
			return err
		}
	}
	auth, err := mcpOAuth(f)
	if err != nil {
		return err
	}
	conns, oauthProviders, err := openConnections(ctx, f, auth, logger)
	if err != nil {
		return err
	}
	mcpSources, closeMCP, err := openMCP(ctx, f, mcpConfig, conns, auth, logger)
	if err != nil {
		return err
	}
	defer closeMCP()
	events, err := openLiveEvents(f, logger)
	if err != nil {
		return err
	}
	defer events.Stop()
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		DataDir: f.dataDir, Workspace: f.workspace, Models: models,
		Builtins:         builtinsFor(os.Geteuid(), f.allowRootShell, logger),
		FetchAllow:       strings.Split(os.Getenv(builtin.FetchAllowEnv), ","),
		ShellEnv:         builtin.ParseShellEnv(os.Getenv("TOLLGATE_SHELL_ENV")),
		GitHubAPIURL:     os.Getenv("TOLLGATE_GITHUB_API_URL"),
		SearchAttributes: useSearchAttributes(ctx, c, f, logger),
		Webhooks:         hooks,
		Connections:      conns,
		ToolSources:      mcpSources,
		Events:           events.publisher(),
		Rules:            rules,
		Agents:           named,
	})
	if err != nil {
		return err
	}
	for _, msg := range plugin.SkippedRules() {
		logger.Warn("Approval rule skipped", "reason", msg)
	}
	if f.policy != "" {
		logger.Info("Approval rules loaded", "file", f.policy, "rules", len(rules))
	}

	stopWorkspace, err := startWorkspaceWorker(c, plugin, f, logger)
	if err != nil {
		return err
	}
	defer stopWorkspace()
	stopModels, err := startModelWorkers(c, plugin, f.taskQueue, logger)
	if err != nil {
		return err
	}
	defer stopModels()
	w := worker.New(c, f.taskQueue, worker.Options{Plugins: []worker.Plugin{plugin}})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()

	var gw *devGateway
	if f.dev && f.gatewayAddr != "" {
		if gw, err = startDevGateway(f.gatewayAddr, f.dataDir, c, f.taskQueue, logger, conns, oauthProviders, events.source(), people...); err != nil {
			return err
		}
		defer gw.Stop()
	}
	printBanner(f, plugin.Workspace(), uiURL, gw, events)
	<-ctx.Done()
	logger.Info("Shutting down")
	return nil
}

// useSearchAttributes decides whether turns keep the search attributes
// current: with auto, when the server has every one. A server without
// them would fail every workflow task that wrote one, so the worker runs
// without and says so once.
func useSearchAttributes(ctx context.Context, c client.Client, f flags, logger *slog.Logger) bool {
	switch f.searchAttributes {
	case "on":
		return true
	case "off":
		return false
	}
	missing, err := tollgate.MissingSearchAttributes(ctx, c, nsOr(f.namespace))
	switch {
	case err != nil:
		logger.Warn("Cannot list the server's search attributes; turns will not keep them current (--search-attributes on forces them)", "error", err)
		return false
	case len(missing) > 0:
		logger.Warn("The server lacks Tollgate's search attributes; turns run without them and cannot be listed by status until they are registered (see docs/turns.md)", "missing", strings.Join(missing, ","))
		return false
	}
	return true
}

func printBanner(f flags, workspace, uiURL string, gw *devGateway, events *liveEvents) {
	address := f.address
	if address == "" {
		address = envOr("TEMPORAL_ADDRESS", client.DefaultHostPort)
	}
	ui := ""
	if uiURL != "" {
		ui = fmt.Sprintf("  Temporal Web UI  %s\n", uiURL)
	}
	if gw != nil {
		ui += fmt.Sprintf("  Gateway, inbox   %s/inbox  (dev mode: loopback only; same-origin requests without a key act as %q)\n", gw.url, gateway.DevPrincipal)
		ui += fmt.Sprintf("  Dev API key      %s\n", gw.key)
		for _, p := range gw.people {
			groups := "no groups"
			if len(p.Groups) > 0 {
				groups = "groups " + strings.Join(p.Groups, ", ")
			}
			ui += fmt.Sprintf("  Key of %-9s %s  (%s)\n", p.Principal, p.Key, groups)
		}
	}
	if events != nil {
		ui += fmt.Sprintf("  Live events      %s  (TOLLGATE_NATS_URL for more workers and gateways)\n", events.url)
	}
	if f.agentsFile != "" {
		ui += fmt.Sprintf("  Agents           %s  (go run ./starter agents lists them; run one with --agent NAME)\n", f.agentsFile)
	}
	fmt.Fprintf(os.Stderr, `
Tollgate worker ready.
  Temporal server  %s (namespace %s)
%s  Task queue       %s
  Workspace        %s
  Data             %s

Start a first turn in another shell:
  go run ./starter run --model scripted:demo --interactive "Summarise notes.txt into summary.md"
%s
`, address, nsOr(f.namespace), ui, f.taskQueue, workspace, f.dataDir, gatewayHint(gw))
}

// gatewayHint shows how to find waiting calls over HTTP.
func gatewayHint(gw *devGateway) string {
	if gw == nil {
		return ""
	}
	return fmt.Sprintf("Or list what waits for a person over HTTP:\n  curl -H \"Authorization: Bearer %s\" %s/v1/turns?status=waiting\n", gw.key, gw.url)
}

func nsOr(ns string) string {
	if ns != "" {
		return ns
	}
	return envOr("TEMPORAL_NAMESPACE", client.DefaultNamespace)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// serverLogger keeps the embedded server quiet unless --log-level debug:
// even at error level it logs expected start-up noise ("Frontend is not
// healthy yet") that would drown the worker's own logs. Real trouble
// reaches the worker as client errors, which it logs.
func serverLogger(logger *slog.Logger) serverlog.Logger {
	if logger.Enabled(context.Background(), slog.LevelDebug) {
		return serverlog.NewZapLogger(serverlog.BuildZapLogger(serverlog.Config{Level: "warn"}))
	}
	return serverlog.NewNoopLogger()
}
