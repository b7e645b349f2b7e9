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
// Every call carries a progress token; the server's progress for it goes
// out through stream.Progress (Progress): a tool_progress event of the
// turn and the activity's heartbeat details.
//
// # Tool list changes
//
// A server that declares tools.listChanged keeps the session that listed
// its tools open to say when they change; the Toolset then lists them
// again (and every Options.RefreshInterval) and, as a tool.Source, tells
// the worker's registry. Turns record their tools' specs when they
// start, so a change reaches new turns only.
//
// # Tasks
//
// A tool the server runs only as a task is called as one on an HTTP
// server that declares task-augmented calls; the call polls the task,
// durably, and fetches its result (see taskcall.go).
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
	"bytes"
	"context"
	"encoding/json"
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
	// RefreshInterval is how often every server's tools are listed again
	// (0: only when a server says they changed, and on Refresh).
	RefreshInterval time.Duration
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

// Toolset is the tools of every configured server. A server's tools are
// listed again when it says they changed (notifications/tools/list_changed,
// on a session Tollgate keeps open to the servers that can say so, or on
// any call's session), every Options.RefreshInterval, and on Refresh; as
// a tool.Source (tollgate.Options.ToolSources) the worker's registry
// follows the changes.
type Toolset struct {
	live    *liveSet
	servers []*server
	logger  *slog.Logger
	stop    context.CancelFunc
	loops   sync.WaitGroup

	mu       sync.Mutex
	tools    map[string][]tool.Tool
	skipped  map[string][]Skipped
	watchers []func() error
}

// Skipped is a tool a server listed that Tollgate does not offer, and
// why: disabled by the operator, a name or schema it cannot use.
type Skipped struct {
	Server string
	Tool   string
	Reason string
}

// Tools returns the tools now, in server and tool name order.
func (t *Toolset) Tools() []tool.Tool {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []tool.Tool
	for _, s := range t.servers {
		out = append(out, t.tools[s.name]...)
	}
	return out
}

// Skipped lists the tools left out, for the worker's log.
func (t *Toolset) Skipped() []Skipped {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Skipped
	for _, s := range t.servers {
		out = append(out, t.skipped[s.name]...)
	}
	return out
}

// Watch has fn called after the tools changed (tool.Source).
func (t *Toolset) Watch(fn func() error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watchers = append(t.watchers, fn)
}

var _ tool.Source = (*Toolset)(nil)

// Close stops following the servers' tool lists and kills every server
// process still running a call. The worker calls it on shutdown, after
// its activities have had their stop timeout: what runs then would be
// cut off anyway.
func (t *Toolset) Close() {
	t.stop()
	t.loops.Wait()
	for _, s := range t.servers {
		s.closeWatch()
	}
	t.live.killAll()
}

// Refresh lists every server's tools again now and reports whether any
// changed. A server that cannot be listed keeps its earlier tools (its
// error is returned).
func (t *Toolset) Refresh(ctx context.Context) (bool, error) {
	var errs []error
	changed := false
	for _, s := range t.servers {
		c, err := t.refresh(ctx, s)
		changed = changed || c
		errs = append(errs, err)
	}
	return changed, errors.Join(errs...)
}

// refresh lists s's tools again and, when they differ from those offered,
// offers the new ones and tells the watchers. Refreshes of one server
// run one at a time.
func (t *Toolset) refresh(ctx context.Context, s *server) (bool, error) {
	s.refreshing.Lock()
	defer s.refreshing.Unlock()
	listed, tap, err := s.listTools(ctx)
	if err != nil {
		t.logger.Warn("MCP tool list not refreshed; the earlier tools stay", "mcp_server", s.name, "error", err)
		return false, err
	}
	// An override naming a tool the server no longer lists restricts
	// nothing now; at start it is an error (a typo), here it is not.
	tools, skipped, err := s.adapt(listed, tap, false)
	if err != nil {
		return false, err
	}
	t.mu.Lock()
	if sameSpecs(t.tools[s.name], tools) {
		t.skipped[s.name] = skipped
		t.mu.Unlock()
		return false, nil
	}
	t.tools[s.name], t.skipped[s.name] = tools, skipped
	watchers := slices.Clone(t.watchers)
	t.mu.Unlock()
	t.logger.Info("MCP server's tools changed; turns started from now on see the new list", "mcp_server", s.name, "tools", len(tools))
	for _, sk := range skipped {
		t.logger.Warn("MCP tool not offered", "server", sk.Server, "tool", sk.Tool, "reason", sk.Reason)
	}
	for _, fn := range watchers {
		if err := fn(); err != nil {
			t.logger.Warn("The worker kept the earlier tools of an MCP server", "mcp_server", s.name, "error", err)
		}
	}
	return true, nil
}

// sameSpecs says whether two tool lists offer the same specs.
func sameSpecs(a, b []tool.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, err1 := json.Marshal(tool.Describe(a[i]))
		y, err2 := json.Marshal(tool.Describe(b[i]))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

// follow refreshes s when it says its tools changed, and every interval
// (0: only when it says so), until ctx ends.
func (t *Toolset) follow(ctx context.Context, s *server, interval time.Duration) {
	defer t.loops.Done()
	var tick <-chan time.Time
	if interval > 0 {
		tk := time.NewTicker(interval)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.changed:
		case <-tick:
		}
		rctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
		_, _ = t.refresh(rctx, s)
		cancel()
	}
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
	taps := make([]*taskTap, len(names))
	errs := make([]error, len(names))
	servers := make([]*server, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		servers[i] = &server{name: name, cfg: cfg.Servers[name], opts: opts, states: states, live: live, changed: make(chan struct{}, 1)}
		wg.Go(func() {
			found[i], taps[i], errs[i] = servers[i].listTools(ctx)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range servers {
			s.closeWatch()
		}
		return nil, err
	}
	ts := &Toolset{live: live, servers: servers, logger: opts.Logger, tools: map[string][]tool.Tool{}, skipped: map[string][]Skipped{}}
	for i, s := range servers {
		tools, skipped, err := s.adapt(found[i], taps[i], true)
		if err != nil {
			for _, s := range servers {
				s.closeWatch()
			}
			return nil, err
		}
		ts.tools[s.name], ts.skipped[s.name] = tools, skipped
	}
	followCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	ts.stop = stop
	for _, s := range servers {
		ts.loops.Add(1)
		go ts.follow(followCtx, s, opts.RefreshInterval)
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
	// changed is signalled when the server says its tools changed.
	changed chan struct{}
	// refreshing serializes listing the server's tools again.
	refreshing sync.Mutex
	// watch is the session kept open to hear the server's
	// notifications/tools/list_changed (nil: none open).
	watchMu sync.Mutex
	watch   *session
	// held are the calls held open on this worker for an answer.
	held heldCalls
	// svc is the worker's own token (client_credentials).
	svc serviceTokens
}

// maxTools bounds what one server may list.
const maxTools = 512

// listTools opens a discovery session and lists the server's tools, and
// which of them the server runs only as tasks. A server that can say its
// tools changed keeps the session open for that, if none is open yet.
func (s *server) listTools(ctx context.Context) ([]*mcpsdk.Tool, *taskTap, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	tap := newTaskTap()
	sess, err := s.connect(ctx, sessionOptions{discovery: true, tasks: tap, user: s.opts.DiscoveryUser})
	if err != nil {
		if c, _ := sess.challenged(); c != nil {
			return nil, nil, s.discoveryRefused(ctx, c)
		}
		return nil, nil, fmt.Errorf("mcp server %s: %w", s.name, s.redact(err))
	}
	kept := false
	defer func() {
		if !kept {
			sess.close(ctx)
		}
	}()
	ir := sess.cs.InitializeResult()
	if ir != nil {
		// Each server gets the newest revision both speak; which one
		// decides how its questions come (see the package documentation).
		s.opts.Logger.Debug("MCP server connected", "mcp_server", s.name, "protocol_version", ir.ProtocolVersion)
	}
	var tools []*mcpsdk.Tool
	for t, err := range sess.cs.Tools(ctx, nil) {
		if err != nil {
			if c, _ := sess.challenged(); c != nil {
				return nil, nil, s.discoveryRefused(ctx, c)
			}
			return nil, nil, fmt.Errorf("mcp server %s: list tools: %w", s.name, s.redact(err))
		}
		if len(tools) == maxTools {
			return nil, nil, fmt.Errorf("mcp server %s lists more than %d tools", s.name, maxTools)
		}
		tools = append(tools, t)
	}
	if ir != nil && ir.Capabilities != nil && ir.Capabilities.Tools != nil && ir.Capabilities.Tools.ListChanged {
		kept = s.keepWatch(sess)
	}
	return tools, tap, nil
}

// keepWatch keeps sess open to hear the server's list_changed, unless a
// session does that already. When the kept session ends (the server
// went away), the next refresh opens another.
func (s *server) keepWatch(sess *session) bool {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.watch != nil {
		return false
	}
	s.watch = sess
	if sess.proc != nil {
		// The live set is the calls' processes; Close ends this one
		// itself.
		s.live.remove(sess.proc)
	}
	go func() {
		_ = sess.cs.Wait()
		s.watchMu.Lock()
		lost := s.watch == sess
		if lost {
			s.watch = nil
		}
		s.watchMu.Unlock()
		sess.close(context.Background())
		if lost {
			// The server went away (a restart, say): list its tools
			// again in a while, which opens another session to hear it.
			time.AfterFunc(watchRetry, func() { s.toolsChanged(context.Background(), nil) })
		}
	}()
	return true
}

// watchRetry is how long after losing the kept session its server's
// tools are listed again.
var watchRetry = 30 * time.Second

// closeWatch closes the kept session, if any.
func (s *server) closeWatch() {
	s.watchMu.Lock()
	sess := s.watch
	s.watch = nil
	s.watchMu.Unlock()
	if sess != nil {
		sess.close(context.Background())
	}
}

// toolsChanged asks for the server's tools to be listed again.
func (s *server) toolsChanged(context.Context, *mcpsdk.ToolListChangedRequest) {
	select {
	case s.changed <- struct{}{}:
	default:
		// A refresh is pending already.
	}
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
	// httpc is an HTTP session's client, for the requests the SDK does
	// not make (tasks/*); tap reads what the SDK does not decode.
	httpc *http.Client
	tap   *taskTap
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
	if s.changed != nil {
		// Any session may hear that the server's tools changed.
		copts.ToolListChangedHandler = s.toolsChanged
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
		sess.httpc = httpClient(s.opts.HTTPClient, headers, s.cfg.sessionBudget(), &sess.over, so.tapOrNil())
		sess.tap = so.tasks
		transport = &mcpsdk.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: sess.httpc,
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
