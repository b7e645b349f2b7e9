// Package mcp offers the tools of MCP servers as Tollgate tools, with
// Tollgate's approvals, retries, typed results and parked waits.
//
// A worker names its servers in a configuration file (see Config); Open
// starts each one, lists its tools and returns them named
// <server>.<tool>, with the server's description and argument schema.
// Annotations set each tool's policy (see PolicyFor); the operator's
// per-tool overrides win.
//
// # One session per call
//
// Every call opens its own MCP session (a fresh process for a stdio
// server) and closes it when the run ends. Nothing is shared between
// turns or users: a server cannot carry one user's data into another's
// call, an elicitation belongs to exactly one call, an HTTP session
// carries exactly one user's credential, and a crashed server costs one
// call. The price is a process start (stdio) or a handshake (HTTP) per
// call.
//
// # Elicitation
//
// Every session declares elicitation (form and URL modes), the discovery
// session included, and an HTTP session opens the standalone stream, so
// a question sent outside the call's request reaches the call running on
// that session (a session runs one call). A question becomes a question
// or choice wait (a field with fixed values, a boolean, a bare
// confirmation or a URL-mode page are choices); the person's answer,
// checked by the workflow against the interrupt's schema, comes back as
// the next run's Resume, is completed with the schema's defaults and
// checked against the server's schema. Nothing runs and no session stays
// open while a person answers, so a worker may stop or crash meanwhile.
// What a call has been answered is kept in the state directory, which
// every worker of the task queue must share.
//
// A server on protocol 2026-07-28 asks with an input_required result
// (multi-round-trip requests): the round's input requests are put to the
// person one at a time, and the call is issued again with their answers
// and the server's request state.
//
// A server on an older revision asks with elicitation requests in the
// middle of the call: the run ends and the call is held open on this
// worker for the server's timeout, so that an answer coming back here in
// time reaches the waiting request (see held.go). Otherwise the call is
// cancelled at the server, and the next run issues it again and answers
// the server's question at once when it is asked again, word for word (questions asked earlier in
// the call get their earlier answers, in order). That needs a server
// whose questions are deterministic for the same arguments: one that
// asks something different ends the call with a tool error rather than
// guessing where the answer goes, and whatever a tool does before its
// first question it does again on every re-issue.
//
// # Progress
//
// Every call carries a progress token; the server's progress for it
// becomes the activity's heartbeat details (Progress).
//
// # Authorization
//
// Requests to an HTTP server carry the turn user's stored connection for
// the provider named like the server. A 401 (or a 403 asking for more
// scope) ends the run as connection_required for that provider; after
// "connected" the call runs again with the stored credential. With
// Options.OAuth, the provider is discovered from the server itself (MCP's
// authorization flow, package connections/oauth's DiscoverMCP) and kept
// in a registry the gateway shares.
//
// # Untrusted servers
//
// Descriptions, schemas and results come from the server and are
// treated as untrusted: descriptions and schemas are bounded, a schema
// that does not compile drops its tool, what one call receives is
// bounded, stdio servers see only an allowlisted environment, and each
// runs contained as the shell tool's commands are (package jail: a cgroup
// of its own for a root worker, else a PID namespace): when the call ends
// or is cancelled, the server and every process it started are killed,
// detached (setsid) ones included. Open logs how servers are contained,
// and warns when this worker can only kill their process groups.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/internal/jail"
	"github.com/tollgate-dev/tollgate/tool"
)

// Options configure Open.
type Options struct {
	// Connections holds users' credentials for HTTP servers (provider:
	// the server's name). Nil: calls carry no user credential.
	Connections connections.Store
	// StateDir keeps the answers of calls waiting for a person's answer
	// to a server's question. Every worker that may run a turn's calls
	// must see the same directory (the data directory's "mcp"). Empty
	// keeps them in memory: an answer arriving after a restart then ends
	// its call with a tool error.
	StateDir string
	// StateMaxAge is how old a waiting call's record may get before Open
	// removes it (default DefaultStateMaxAge).
	StateMaxAge time.Duration
	// HTTPClient is the base of HTTP servers' clients (its transport and
	// timeout); nil is http.DefaultTransport.
	HTTPClient *http.Client
	// StartTimeout bounds starting a server and listing its tools
	// (default 60s: a stdio server run through "go run" may compile).
	StartTimeout time.Duration
	// Logger receives what the servers' sessions report; nil discards it.
	Logger *slog.Logger
	// OAuth, when set, runs MCP's authorization flow for an HTTP server
	// that answers 401: Tollgate discovers its authorization server,
	// registers itself there, and keeps the result in OAuth.Registry as
	// the connection provider named like the server, so the connect link
	// of the call's connection_required wait leads to the server's own
	// consent page. Nil: the provider must be one the operator
	// configured.
	OAuth *OAuth
	// DiscoveryUser is whose stored connection lists the tools of an HTTP
	// server that answers 401 to the worker's own request at start (a
	// server without discovery_headers). When that user has no
	// connection yet, Open fails with a *ConnectionNeeded naming the
	// provider to connect (discovered already when OAuth is set).
	DiscoveryUser string
	// Getenv and Environ read the worker's environment (os.Getenv and
	// os.Environ when nil).
	Getenv  func(string) string
	Environ func() []string
}

func (o Options) withDefaults() Options {
	if o.StateMaxAge <= 0 {
		o.StateMaxAge = DefaultStateMaxAge
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Environ == nil {
		o.Environ = os.Environ
	}
	return o
}

// OAuth is how MCP's authorization flow runs (Options.OAuth).
type OAuth struct {
	// Registry keeps the providers discovered for servers; the gateway
	// must see the same one (oauth.Providers.WithRegistry).
	Registry oauth.Registry
	// Client is how Tollgate presents itself to authorization servers:
	// the gateway's callback URL, a client name, a client ID metadata
	// document URL. A server's own "oauth" entry supplies a
	// pre-registered client.
	Client oauth.MCPClient
}

// ConnectionNeeded is Open's error for a server that lists its tools only
// to a user with a connection, when DiscoveryUser has none.
type ConnectionNeeded struct {
	Server   string
	User     string
	Provider string
	Scopes   []string
}

func (e *ConnectionNeeded) Error() string {
	return fmt.Sprintf("mcp server %s lists its tools only with an account connection: connect %s's %s account (the connect flow of the gateway or starter), then start the worker again", e.Server, e.User, e.Provider)
}

// StateDir is where a worker with data directory dataDir keeps the
// records of calls waiting for an answer (Options.StateDir).
func StateDir(dataDir string) string { return filepath.Join(dataDir, "mcp") }

// Toolset is the tools of every configured server.
type Toolset struct {
	tools   []tool.Tool
	skipped []Skipped
	live    *liveSet
}

// Skipped is a tool a server listed that Tollgate does not offer, and
// why: disabled by the operator, a name or schema it cannot use.
type Skipped struct {
	Server string
	Tool   string
	Reason string
}

// Tools returns the tools, in server and tool name order.
func (t *Toolset) Tools() []tool.Tool { return slices.Clone(t.tools) }

// Skipped lists the tools left out, for the worker's log.
func (t *Toolset) Skipped() []Skipped { return slices.Clone(t.skipped) }

// Close kills every server process still running a call. The worker
// calls it on shutdown, after its activities have had their stop
// timeout: what runs then would be cut off anyway.
func (t *Toolset) Close() {
	t.live.killAll()
}

// Open starts every configured server, lists its tools and returns them.
// A server that cannot be started or listed is an error: a worker that
// quietly offered fewer tools would fail its turns later, and less
// clearly.
func Open(ctx context.Context, cfg Config, opts Options) (*Toolset, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("mcp config: %w", err)
	}
	opts = opts.withDefaults()
	var states stateStore = newMemoryStates()
	if opts.StateDir != "" {
		fs, err := newFileStates(opts.StateDir, opts.StateMaxAge)
		if err != nil {
			return nil, err
		}
		states = fs
	}
	logContainment(cfg, opts.Logger)
	live := &liveSet{m: map[*process]struct{}{}}
	names := sortedKeys(cfg.Servers)
	found := make([][]*mcpsdk.Tool, len(names))
	errs := make([]error, len(names))
	servers := make([]*server, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		servers[i] = &server{name: name, cfg: cfg.Servers[name], opts: opts, states: states, live: live}
		wg.Go(func() {
			found[i], errs[i] = servers[i].listTools(ctx)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ts := &Toolset{live: live}
	for i, s := range servers {
		tools, skipped, err := s.adapt(found[i])
		if err != nil {
			return nil, err
		}
		ts.tools = append(ts.tools, tools...)
		ts.skipped = append(ts.skipped, skipped...)
	}
	return ts, nil
}

// logContainment says at start how stdio servers' processes are held, so
// that an operator learns of a worker that cannot contain them from its
// log rather than from a process left running.
func logContainment(cfg Config, logger *slog.Logger) {
	var stdio []string
	for _, name := range sortedKeys(cfg.Servers) {
		if cfg.Servers[name].Command != "" {
			stdio = append(stdio, name)
		}
	}
	if len(stdio) == 0 {
		return
	}
	k := containment()
	if k == jail.ProcessGroup {
		logger.Warn("This worker cannot contain the processes MCP stdio servers start (no writable cgroup v2, no PID namespace): "+
			"one a server detaches (setsid, a double fork) may outlive its call", "mcp_servers", strings.Join(stdio, ","))
		return
	}
	logger.Info("MCP stdio servers run contained: when a call ends, the server and every process it started are killed",
		"containment", k.String(), "mcp_servers", strings.Join(stdio, ","))
}

// server is one configured server at run time.
type server struct {
	name   string
	cfg    Server
	opts   Options
	states stateStore
	live   *liveSet
	// tasks says which listed tools the server runs only as tasks.
	tasks *taskTap
	// held are the calls held open on this worker for an answer.
	held heldCalls
	// svc is the worker's own token (client_credentials).
	svc serviceTokens
}

// maxTools bounds what one server may list.
const maxTools = 512

// listTools opens a discovery session and lists the server's tools.
func (s *server) listTools(ctx context.Context) ([]*mcpsdk.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	s.tasks = newTaskTap()
	sess, err := s.connect(ctx, sessionOptions{discovery: true, tasks: s.tasks, user: s.opts.DiscoveryUser})
	if err != nil {
		if c, _ := sess.challenged(); c != nil {
			return nil, s.discoveryRefused(ctx, c)
		}
		return nil, fmt.Errorf("mcp server %s: %w", s.name, s.redact(err))
	}
	defer sess.close(ctx)
	if ir := sess.cs.InitializeResult(); ir != nil {
		// Each server gets the newest revision both speak; which one
		// decides how its questions come (see the package documentation).
		s.opts.Logger.Info("MCP server connected", "mcp_server", s.name, "protocol_version", ir.ProtocolVersion)
	}
	var tools []*mcpsdk.Tool
	for t, err := range sess.cs.Tools(ctx, nil) {
		if err != nil {
			if c, _ := sess.challenged(); c != nil {
				return nil, s.discoveryRefused(ctx, c)
			}
			return nil, fmt.Errorf("mcp server %s: list tools: %w", s.name, s.redact(err))
		}
		if len(tools) == maxTools {
			return nil, fmt.Errorf("mcp server %s lists more than %d tools", s.name, maxTools)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// discoveryRefused is Open's error for a server that refused to list its
// tools to the worker (HTTP 401, or 403 asking for more scope).
func (s *server) discoveryRefused(ctx context.Context, c *challenge) error {
	if s.usesServiceToken() {
		s.forgetServiceToken()
		return fmt.Errorf("mcp server %s refused the worker's own token (HTTP %d) when Tollgate listed its tools", s.name, c.status)
	}
	if s.opts.DiscoveryUser == "" {
		return fmt.Errorf("mcp server %s answered HTTP %d when Tollgate listed its tools: give it a credential for discovery in \"discovery_headers\", or name a discovery user whose connection lists them", s.name, c.status)
	}
	if c.status == http.StatusForbidden && !c.insufficient {
		return fmt.Errorf("mcp server %s refused to list its tools to %s's connection (HTTP 403)", s.name, s.opts.DiscoveryUser)
	}
	scopes := c.scopes
	if s.opts.OAuth != nil {
		reg, err := s.discoverAuth(ctx, c)
		if err != nil {
			return fmt.Errorf("mcp server %s answered HTTP %d when Tollgate listed its tools, and its authorization server could not be used: %w", s.name, c.status, err)
		}
		scopes = reg.Scopes
	}
	return &ConnectionNeeded{Server: s.name, User: s.opts.DiscoveryUser, Provider: s.name, Scopes: scopes}
}

// sessionOptions say who a session is for.
type sessionOptions struct {
	// discovery sessions list tools at start: discovery headers, no user.
	discovery bool
	user      string
	elicit    func(context.Context, *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error)
	progress  *progressSink
	// tasks, for a discovery session, learns which tools require tasks.
	tasks *taskTap
}

// tapOrNil keeps a nil *taskTap from becoming a non-nil io.Writer.
func (so sessionOptions) tapOrNil() io.Writer {
	if so.tasks == nil {
		return nil
	}
	return so.tasks
}

// session is one open MCP session and what it runs on.
type session struct {
	cs   *mcpsdk.ClientSession
	proc *process
	auth *userAuth
	live *liveSet
	// over records that the server sent more than the session's bound.
	over atomic.Bool
}

// connect opens a session. On error the returned session (possibly nil)
// still tells what an HTTP server's challenge said.
func (s *server) connect(ctx context.Context, so sessionOptions) (*session, error) {
	elicit := so.elicit
	if elicit == nil {
		elicit = refuseElicitation
	}
	copts := &mcpsdk.ClientOptions{
		Logger: s.opts.Logger.With("mcp_server", s.name),
		// Every session, discovery included, declares the same
		// capabilities: a server may offer tools only to a client that
		// can elicit, and a tool list read without them would leave those
		// tools out. No roots: a server learns nothing of the worker's
		// files.
		Capabilities:       clientCapabilities(),
		ElicitationHandler: elicit,
		// An input_required result comes back to the call, which parks
		// it on a durable wait rather than holding the session open
		// while a person answers.
		MultiRoundTrip: &mcpsdk.MultiRoundTripOptions{Disabled: true},
	}
	if so.progress != nil {
		copts.ProgressNotificationHandler = so.progress.handle
	}
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "tollgate", Version: "1"}, copts)
	sess := &session{live: s.live}
	var transport mcpsdk.Transport
	if s.cfg.Command != "" {
		proc, err := startProcess(s.cfg.Command, s.cfg.Args, s.cfg.Dir, serverEnv(s.opts.Environ(), s.cfg.Env))
		if err != nil {
			return nil, &startError{err}
		}
		sess.proc = proc
		s.live.add(proc)
		// The reader enforces the bound on one message itself, so that
		// going over it is told apart from a broken pipe; the SDK's own
		// bound sits above it.
		transport = &mcpsdk.IOTransport{
			Reader:        &stdioReader{p: proc, budget: s.cfg.sessionBudget(), maxLine: int64(s.cfg.maxResultBytes()), over: &sess.over, tap: so.tapOrNil()},
			Writer:        stdioWriter{proc},
			MaxLineLength: s.cfg.maxResultBytes() + 1<<10,
		}
	} else {
		headers, err := resolveHeaders(s.cfg.Headers, s.opts.Getenv)
		if err != nil {
			return nil, err
		}
		if so.discovery {
			extra, err := resolveHeaders(s.cfg.DiscoveryHeaders, s.opts.Getenv)
			if err != nil {
				return nil, err
			}
			for k, v := range extra {
				headers[k] = v
			}
		}
		sess.auth = &userAuth{user: so.user, provider: s.name}
		if !so.discovery || so.user != "" {
			sess.auth.store = s.opts.Connections
		}
		if s.usesServiceToken() {
			// The worker's own token goes with every request; no user's.
			tok, err := s.serviceToken(ctx)
			if err != nil {
				return nil, err
			}
			headers.Set("Authorization", "Bearer "+tok)
			sess.auth.store = nil
		}
		transport = &mcpsdk.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: httpClient(s.opts.HTTPClient, headers, s.cfg.sessionBudget(), &sess.over, so.tapOrNil()),
			// The standalone stream is open: a server may send a request
			// that is not tied to the call's own request there (an
			// elicitation, most often). A session runs one call, so the
			// call's handlers receive it.
			OAuthHandler: sess.auth,
			MaxEventSize: s.cfg.maxResultBytes(),
		}
	}
	cs, err := client.Connect(ctx, transport, &mcpsdk.ClientSessionOptions{ProtocolVersion: s.cfg.ProtocolVersion})
	if err != nil {
		sess.close(ctx)
		return sess, fmt.Errorf("connect: %w", err)
	}
	sess.cs = cs
	return sess, nil
}

// clientCapabilities are what Tollgate does for a server: elicitation in
// both modes (form: a question or choice wait; url: a wait whose card
// carries the page).
func clientCapabilities() *mcpsdk.ClientCapabilities {
	return &mcpsdk.ClientCapabilities{Elicitation: &mcpsdk.ElicitationCapabilities{
		Form: &mcpsdk.FormElicitationCapabilities{},
		URL:  &mcpsdk.URLElicitationCapabilities{},
	}}
}

// errNoCall is what a server hears for a request on a session that runs
// no call (the discovery session at start): there is no person to ask.
var errNoCall = errors.New("Tollgate is listing this server's tools; no call is running on this session and no user can be asked")

func refuseElicitation(context.Context, *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
	return nil, errNoCall
}

// close ends the session; a stdio server's jail is killed at once if the
// call was cancelled, else after its grace period.
func (sess *session) close(ctx context.Context) {
	if sess == nil {
		return
	}
	if sess.proc != nil && ctx.Err() != nil {
		sess.proc.kill()
	}
	if sess.cs != nil {
		_ = sess.cs.Close()
	}
	if sess.proc != nil {
		sess.proc.stop()
		sess.live.remove(sess.proc)
	}
}

func (sess *session) challenged() (*challenge, bool) {
	if sess == nil {
		return nil, false
	}
	return sess.auth.result()
}

// redact keeps a configured URL's query (which may hold a key) out of an
// error that goes to a card or a log.
func (s *server) redact(err error) error {
	if err == nil || s.cfg.URL == "" {
		return err
	}
	if red := redactURL(s.cfg.URL); red != s.cfg.URL && strings.Contains(err.Error(), s.cfg.URL) {
		return &redactedError{msg: strings.ReplaceAll(err.Error(), s.cfg.URL, red), err: err}
	}
	return err
}

// redactedError words an error without a secret and keeps its chain for
// errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// liveSet is the server processes running now.
type liveSet struct {
	mu sync.Mutex
	m  map[*process]struct{}
}

func (l *liveSet) add(p *process) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[p] = struct{}{}
}

func (l *liveSet) remove(p *process) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, p)
}

func (l *liveSet) killAll() {
	l.mu.Lock()
	procs := make([]*process, 0, len(l.m))
	for p := range l.m {
		procs = append(procs, p)
	}
	l.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
}
