// Command gateway serves Tollgate's HTTP gateway: the JSON API under /v1,
// one-click links and the web inbox (package gateway). It is a Temporal
// client like the starter: it reads Temporal's own client configuration
// and needs the workers' data directory for large payloads.
//
//	gateway --keys keys.json [--listen 127.0.0.1:8080] [--link-secret-file link.secret]
//	gateway --dev                       anonymous access as "dev", loopback only
//	gateway keys add --principal ops --scopes read,respond [--tools write_file] [--users ann] [--groups leads] --file keys.json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/internal/telemetry"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// usageError is a command line that cannot run; exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	var err error
	if len(args) >= 2 && args[0] == "keys" && args[1] == "add" {
		err = keysAdd(args[2:], stdout, stderr, getenv)
	} else if len(args) >= 1 && args[0] == "keys" {
		err = usageError{"usage: gateway keys add --principal NAME --scopes read,respond[,start] [--tools a,b] [--users ann,bob] [--groups leads] --file keys.json"}
	} else {
		err = serve(ctx, args, stderr, getenv)
	}
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "gateway:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "gateway:", err)
		return 1
	}
}

func keysAdd(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("gateway keys add", flag.ContinueOnError)
	fs.SetOutput(stderr)
	principal := fs.String("principal", "", "who the key speaks for: the `by` of its decisions (required)")
	scopes := fs.String("scopes", "", "comma-separated `scopes`: read, respond, start, history, rerun (required)")
	tools := fs.String("tools", "", "comma-separated `tools` whose calls the key may answer (default all)")
	groups := fs.String("groups", "", "comma-separated `groups` the principal belongs to, for calls approval rules leave to a group (docs/approvals.md)")
	users := fs.String("users", "", "comma-separated `users` whose turns alone the key lists, reads, answers and starts (default all)")
	file := fs.String("file", getenv("TOLLGATE_GATEWAY_KEYS"), "keys `file` to append to, created if missing (TOLLGATE_GATEWAY_KEYS)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *principal == "" || *scopes == "" || *file == "" || fs.NArg() > 0 {
		return usageError{"keys add needs --principal, --scopes and --file (or TOLLGATE_GATEWAY_KEYS), and no other arguments"}
	}
	sc, err := apikey.ParseScopes(*scopes)
	if err != nil {
		return usageError{err.Error()}
	}
	key, err := apikey.AddToFile(*file, *principal, sc, apikey.Limits{Tools: splitList(*tools), Users: splitList(*users), Groups: splitList(*groups)})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "Added a key for %s to %s. It is shown only now; the file keeps its hash.\n", *principal, *file)
	fmt.Fprintln(stdout, key)
	return nil
}

// splitList reads a comma-separated flag; nil when it names nothing.
func splitList(v string) []string {
	var out []string
	for t := range strings.SplitSeq(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

type serveFlags struct {
	address, namespace, profile string
	taskQueue, dataDir          string
	listen, hosts               string
	keys                        string
	linkSecret, sessionSecret   string
	oauthProviders              string
	mcpOAuth                    bool
	tlsCert, tlsKey             string
	dev                         bool
	respondTimeout              time.Duration
	logLevel                    string
	natsURL                     string
}

func serve(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) error {
	var f serveFlags
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.address, "address", "", "Temporal frontend `host:port` (default TEMPORAL_ADDRESS or 127.0.0.1:7233)")
	fs.StringVar(&f.namespace, "namespace", "", "Temporal `namespace` (default TEMPORAL_NAMESPACE or default)")
	fs.StringVar(&f.profile, "profile", "", "temporal.toml `profile` (default TEMPORAL_PROFILE or default)")
	fs.StringVar(&f.taskQueue, "task-queue", or(getenv("TOLLGATE_TASK_QUEUE"), workflows.DefaultTaskQueue), "task `queue` POST /v1/turns starts turns on (TOLLGATE_TASK_QUEUE)")
	fs.StringVar(&f.dataDir, "data", datadir.FromEnv(getenv), "the workers' data `directory`, for large payloads (TOLLGATE_DATA)")
	fs.StringVar(&f.listen, "listen", or(getenv("TOLLGATE_GATEWAY_LISTEN"), "127.0.0.1:8080"), "`address` to serve on (TOLLGATE_GATEWAY_LISTEN)")
	fs.StringVar(&f.hosts, "hosts", getenv("TOLLGATE_GATEWAY_HOSTS"), "comma-separated host `names` browsers reach the gateway by, such as its public name behind a proxy; when set (always with --dev), requests naming any other Host, besides the listen address and localhost on its port, get 421, which stops DNS rebinding (TOLLGATE_GATEWAY_HOSTS; TOLLGATE_GATEWAY_URL's host joins them)")
	fs.StringVar(&f.natsURL, "nats-url", getenv("TOLLGATE_NATS_URL"), "NATS `url` the workers publish live events to; serves /v1/turns/{id}/events (TOLLGATE_NATS_URL)")
	fs.StringVar(&f.keys, "keys", getenv("TOLLGATE_GATEWAY_KEYS"), "API keys `file` (TOLLGATE_GATEWAY_KEYS); see `gateway keys add`")
	fs.StringVar(&f.linkSecret, "link-secret-file", getenv("TOLLGATE_LINK_SECRET_FILE"), "`file` with the secret one-click links, connect links and sign-in states are signed with; unset turns /v1/links off (TOLLGATE_LINK_SECRET_FILE)")
	fs.StringVar(&f.oauthProviders, "oauth-providers", getenv("TOLLGATE_OAUTH_PROVIDERS"), "OAuth providers `file`: turns on the connect flow (/v1/connect, /v1/oauth/callback, DELETE /v1/connections); needs --link-secret-file and the workers' --data (TOLLGATE_OAUTH_PROVIDERS)")
	fs.BoolVar(&f.mcpOAuth, "mcp-oauth", getenv("TOLLGATE_MCP_OAUTH") == "1", "turn on the connect flow for the providers workers discovered for their MCP servers (MCP's authorization flow, in the data directory's oauth-registry); needs --link-secret-file and the workers' --data (TOLLGATE_MCP_OAUTH=1)")
	fs.StringVar(&f.sessionSecret, "session-secret-file", getenv("TOLLGATE_GATEWAY_SESSION_SECRET_FILE"), "`file` with the secret inbox sessions are signed with; unset generates one per process, so a restart signs everyone out (TOLLGATE_GATEWAY_SESSION_SECRET_FILE)")
	fs.StringVar(&f.tlsCert, "tls-cert", getenv("TOLLGATE_GATEWAY_TLS_CERT"), "serve HTTPS with this certificate `file` (TOLLGATE_GATEWAY_TLS_CERT)")
	fs.StringVar(&f.tlsKey, "tls-key", getenv("TOLLGATE_GATEWAY_TLS_KEY"), "and this key `file` (TOLLGATE_GATEWAY_TLS_KEY)")
	fs.BoolVar(&f.dev, "dev", false, "let requests without a key in as \"dev\" with every scope; only on a loopback --listen address")
	fs.DurationVar(&f.respondTimeout, "respond-timeout", 10*time.Second, "how long a request waits for a worker before answering 503")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q (did you mean `gateway keys add`?)", fs.Arg(0))}
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usageError{"--tls-cert and --tls-key go together"}
	}
	if f.keys == "" && !f.dev {
		return usageError{"no keys file: pass --keys FILE (or TOLLGATE_GATEWAY_KEYS; make one with `gateway keys add`), or --dev for anonymous access on loopback"}
	}
	if f.dev {
		if err := gateway.CheckLoopback(f.listen); err != nil {
			return usageError{"--dev lets anyone in without a key, so it only listens on loopback: " + err.Error()}
		}
	}
	logger := newLogger(f.logLevel)

	opts := gateway.Options{Addr: f.listen, Dev: f.dev, TaskQueue: f.taskQueue, RespondTimeout: f.respondTimeout, Logger: logger}
	if f.hosts != "" || f.dev {
		for h := range strings.SplitSeq(f.hosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				opts.Hosts = append(opts.Hosts, h)
			}
		}
		if u := getenv("TOLLGATE_GATEWAY_URL"); u != "" {
			opts.Hosts = append(opts.Hosts, u)
		}
	}
	if f.keys != "" {
		keys, err := apikey.Load(f.keys, logger)
		if err != nil {
			return err
		}
		opts.Keys = keys
	}
	if f.linkSecret != "" {
		secret, err := signedtoken.LoadSecret(f.linkSecret)
		if err != nil {
			return fmt.Errorf("link secret: %w", err)
		}
		if opts.Links, err = signedtoken.NewSigner(secret); err != nil {
			return fmt.Errorf("link secret: %w", err)
		}
	}
	connect, err := connectOptions(ctx, f.oauthProviders, f.mcpOAuth, f.linkSecret, f.dataDir, getenv)
	if err != nil {
		return err
	}
	opts.Connect = connect
	if f.natsURL != "" {
		events, err := stream.Connect(stream.Config{URL: f.natsURL, Logger: logger, Name: "tollgate-gateway"})
		if err != nil {
			return err
		}
		defer events.Close()
		opts.Events = events
	}
	if f.sessionSecret != "" {
		secret, err := signedtoken.LoadSecret(f.sessionSecret)
		if err != nil {
			return fmt.Errorf("session secret: %w", err)
		}
		opts.SessionSecret = secret
	}
	// Traces (OTEL_* variables) start before the client, so its calls carry them.
	tracing, err := telemetry.StartTracing(ctx, "tollgate-gateway")
	if err != nil {
		return err
	}
	defer func() { _ = tracing.Shutdown(context.Background()) }()
	c, err := clientconfig.Dial(ctx, clientconfig.Options{DataDir: f.dataDir, Profile: f.profile, Address: f.address, Namespace: f.namespace, Logger: quiet(logger)})
	if err != nil {
		return err
	}
	defer c.Close()
	opts.Temporal = c
	sessions, closeSessions, err := openSessions(ctx, f.dataDir, sessionTTL, getenv)
	if err != nil {
		return err
	}
	defer closeSessions()
	opts.Sessions, opts.SessionTTL = sessions, sessionTTL
	srv, err := gateway.New(opts)
	if err != nil {
		return err
	}
	scheme := "http"
	if f.tlsCert != "" {
		scheme = "https"
	}
	logger.Info("Gateway listening", "url", scheme+"://"+f.listen, "inbox", scheme+"://"+f.listen+"/inbox",
		"dev", f.dev, "links", opts.Links != nil, "sessions_survive_restart", f.sessionSecret != "")
	if f.dev {
		logger.Warn("Dev mode: same-origin requests without a key act as \"dev\" with every scope; do not expose this address")
	}
	return srv.ListenAndServe(ctx, f.tlsCert, f.tlsKey)
}

// sessionTTL is how long an inbox sign-in lasts.
const sessionTTL = 12 * time.Hour

func or(v, def string) string {
	if v != "" {
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

// quiet is the SDK's logger: the SDK logs every retry of an unreachable
// server at info level; the gateway's own answers say it once.
func quiet(l *slog.Logger) *slog.Logger {
	return slog.New(levelAtLeast{h: l.Handler(), min: slog.LevelWarn})
}

type levelAtLeast struct {
	h   slog.Handler
	min slog.Level
}

func (q levelAtLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= q.min && q.h.Enabled(ctx, l)
}
func (q levelAtLeast) Handle(ctx context.Context, r slog.Record) error { return q.h.Handle(ctx, r) }
func (q levelAtLeast) WithAttrs(a []slog.Attr) slog.Handler {
	return levelAtLeast{h: q.h.WithAttrs(a), min: q.min}
}
func (q levelAtLeast) WithGroup(n string) slog.Handler {
	return levelAtLeast{h: q.h.WithGroup(n), min: q.min}
}
