// Package gateway is Tollgate's HTTP front door: a JSON API under /v1 for
// systems that cannot speak Temporal (list turns and their waiting calls,
// read a turn, start one, answer a call), signed one-click links for
// email and chat, and a server-rendered web inbox for people.
//
// Callers authenticate with API keys (package apikey); the principal of
// the key, never the request, is the `by` of every decision. Routes,
// scopes and status codes are the contract in DESIGN.md ("Gateway").
//
//	srv, err := gateway.New(gateway.Options{Temporal: c, Keys: keys})
//	http.ListenAndServe("127.0.0.1:8080", srv)
package gateway

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/stream"
)

// Options configure a Server.
type Options struct {
	// Temporal is a client with the Tollgate client plugin (or the same
	// external payload storage as the workers), so large cards decode.
	Temporal client.Client
	// TaskQueue is where POST /v1/turns starts turns; empty means
	// tollgate.DefaultTaskQueue.
	TaskQueue string
	// Keys authenticates callers. Nil means no key works (only dev mode
	// lets anyone in).
	Keys *apikey.Set
	// Links signs and verifies the gateway's tokens, under the link
	// secret: one-click links (nil disables /v1/links) and, with Connect,
	// connect links and sign-in states.
	Links *signedtoken.Signer
	// Dev lets requests without a key in, as principal "dev" with every
	// scope. Only for a listener on a loopback address: New refuses Dev
	// unless Addr is one, and each anonymous request must come from one.
	Dev bool
	// Addr is the address the server listens on; New checks it in dev
	// mode. In dev mode it answers only to Host headers naming this
	// address, localhost, 127.0.0.1 or [::1] on its port, and Hosts.
	Addr string
	// Hosts are the other names browsers reach the gateway by (a public
	// name behind a proxy): names (any port), host:port pairs or URLs.
	// In dev mode they join the loopback names; outside dev mode, when
	// set, they are the only names the gateway answers to (with the
	// loopback names on the listen port). Every other Host is refused
	// with 421 before routing, which stops DNS rebinding: a page whose
	// name was made to resolve to this machine still sends its own name.
	Hosts []string
	// SessionSecret signs inbox session cookies and CSRF tokens (at least
	// 32 bytes). Empty generates one per Server: sessions then end when
	// the process restarts.
	SessionSecret []byte
	// SessionTTL is how long an inbox login lasts; default 12h.
	SessionTTL time.Duration
	// Sessions keeps signed-in inbox sessions, so signing out ends one
	// on the server. Nil keeps them in memory: right for one process;
	// replicas behind one name need a shared store (NewBucketSessions)
	// and the same SessionSecret.
	Sessions SessionStore
	// RespondTimeout is how long a request waits for a worker (to apply a
	// response, or answer the state query) before answering 503; default
	// 10s.
	RespondTimeout time.Duration
	// ListConcurrency bounds the state queries one list runs at once;
	// default 16.
	ListConcurrency int
	// Logger gets request failures (debug) and internal errors (warn);
	// nil is slog's default.
	Logger *slog.Logger
	// Connect turns OAuth connections on (connect.go); nil leaves
	// /v1/connect, /v1/oauth/callback and /v1/connections off.
	Connect *ConnectOptions
	// Events is the live event log (events.go); nil turns the events
	// routes off (they answer 503). EventsKeepAlive is how often an idle
	// stream gets a comment (default 15s); EventsBuffer how many events
	// are handed to a watcher at once (default 64, at most 8 through a
	// stream.Hub; a watcher that leaves them untaken for the source's
	// SlowReader is closed). A
	// *stream.NATS is wrapped in a stream.Hub, so that all the watchers
	// of one turn on this gateway share one JetStream consumer.
	Events          stream.Source
	EventsKeepAlive time.Duration
	EventsBuffer    int
}

// Server is the gateway: an http.Handler.
type Server struct {
	opts    Options
	turns   tollgate.Client
	log     *slog.Logger
	mux     *http.ServeMux
	secret  []byte
	devUser apikey.Entry
	// summaries caches the turns' summaries for lists.
	summaries summaryCache
	// usedStates are the OAuth flows this process completed.
	usedStates usedStates
	sessions   SessionStore
	// hosts are the configured names (Options.Hosts, the public URL);
	// addrHost and addrPort split Options.Addr, and listenPort is the
	// port Serve listens on, once it does.
	hosts              []allowedHost
	addrHost, addrPort string
	listenPort         atomic.Pointer[string]
	// keepAlive times the events routes' keep-alives (events.go).
	keepAlive stream.Periods
}

// DevPrincipal is who anonymous requests act as in dev mode.
const DevPrincipal = "dev"

// maxBody bounds every request body.
const maxBody = 1 << 20

// New checks opts and builds the server.
func New(opts Options) (*Server, error) {
	if opts.Temporal == nil {
		return nil, errors.New("gateway: Options.Temporal is required")
	}
	if opts.Dev {
		if err := CheckLoopback(opts.Addr); err != nil {
			return nil, fmt.Errorf("gateway: dev mode lets anyone in without a key, so it listens only on a loopback address: %w", err)
		}
	}
	if opts.Connect != nil && opts.Links == nil {
		return nil, errors.New("gateway: Options.Connect needs Options.Links: connect links and sign-in states are signed with the link secret")
	}
	if opts.TaskQueue == "" {
		opts.TaskQueue = tollgate.DefaultTaskQueue
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.RespondTimeout <= 0 {
		opts.RespondTimeout = 10 * time.Second
	}
	if opts.EventsKeepAlive <= 0 {
		opts.EventsKeepAlive = DefaultEventsKeepAlive
	}
	if opts.EventsBuffer <= 0 {
		opts.EventsBuffer = stream.DefaultBuffer
	}
	if n, ok := opts.Events.(*stream.NATS); ok && n != nil {
		opts.Events = stream.NewHub(n, 0)
	}
	if opts.ListConcurrency <= 0 {
		opts.ListConcurrency = 16
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	secret := opts.SessionSecret
	switch {
	case len(secret) == 0:
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("gateway: generate a session secret: %w", err)
		}
	case len(secret) < 32:
		return nil, fmt.Errorf("gateway: the session secret has %d bytes; it needs at least 32", len(secret))
	}
	names := opts.Hosts
	if opts.Connect != nil && opts.Connect.PublicURL != "" {
		names = append(slices.Clip(names), opts.Connect.PublicURL)
	}
	hosts, err := parseHosts(names)
	if err != nil {
		return nil, err
	}
	if opts.Sessions == nil {
		opts.Sessions = NewMemorySessions()
	}
	s := &Server{
		opts: opts,
		// Where a worker shares the gateway's client (worker --dev), the
		// server hands it a started turn's first workflow task in the
		// start's answer; elsewhere a start is an ordinary one.
		turns:    tollgate.Client{Temporal: opts.Temporal, TaskQueue: opts.TaskQueue, EagerStart: true},
		log:      opts.Logger,
		secret:   secret,
		devUser:  apikey.Entry{Principal: DevPrincipal, Scopes: apikey.Scopes},
		sessions: opts.Sessions,
		hosts:    hosts,
	}
	if h, p, err := net.SplitHostPort(opts.Addr); err == nil {
		s.addrHost, s.addrPort = strings.ToLower(h), p
	}
	s.routes()
	return s, nil
}

// CheckLoopback reports whether addr (host:port) listens on loopback
// only: 127.0.0.0/8, ::1 or localhost. An empty host means every
// interface, which is not.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q is not host:port: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address (use 127.0.0.1:PORT)", addr)
	}
	return nil
}

// routes wires the contract's routes. Each path takes only its methods;
// the others get 405 with an Allow header, as JSON on /v1 and as a page
// elsewhere.
func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("/v1/turns", s.api(methods{
		http.MethodGet:  s.requireScope(apikey.Read, s.listTurns),
		http.MethodPost: s.requireScope(apikey.Start, s.startTurn),
	}))
	m.Handle("/v1/agents", s.api(methods{http.MethodGet: s.requireScope(apikey.Read, s.listAgents)}))
	m.Handle("/v1/turns/{id}", s.api(withTurnID(methods{http.MethodGet: s.requireScope(apikey.Read, s.getTurn)})))
	m.Handle("/v1/turns/{id}/cards", s.api(withTurnID(methods{http.MethodGet: s.requireScope(apikey.Read, s.getCards)})))
	m.Handle("/v1/turns/{id}/events", s.api(withTurnID(methods{http.MethodGet: s.requireScopeOrSession(apikey.Read, s.turnEvents)})))
	m.Handle("/v1/sessions/{id}/events", s.api(withTurnID(methods{http.MethodGet: s.requireScopeOrSession(apikey.Read, s.sessionEvents)})))
	m.Handle("/v1/turns/{id}/continue", s.api(withTurnID(methods{http.MethodPost: s.requireScope(apikey.Start, s.continueTurn)})))
	m.Handle("/live/{id}", s.page(withTurnID(methods{http.MethodGet: http.HandlerFunc(s.liveTurn)})))
	m.Handle("/v1/turns/{id}/respond", s.api(withTurnID(methods{http.MethodPost: s.requireScope(apikey.Respond, s.respond)})))
	m.Handle("/v1/turns/{id}/reevaluate", s.api(withTurnID(methods{http.MethodPost: s.requireScope(apikey.Operate, s.reevaluate)})))
	m.Handle("/v1/links/{token}", s.page(methods{
		http.MethodGet:  http.HandlerFunc(s.linkPage),
		http.MethodPost: http.HandlerFunc(s.linkApply),
	}))
	m.Handle("/v1/connect/{token}", s.page(methods{
		http.MethodGet:  http.HandlerFunc(s.connectPage),
		http.MethodPost: http.HandlerFunc(s.connectStart),
	}))
	m.Handle("/v1/oauth/callback", s.page(methods{http.MethodGet: http.HandlerFunc(s.oauthCallback)}))
	m.Handle("/v1/grants", s.api(methods{http.MethodGet: s.requireScope(apikey.Read, s.listGrants)}))
	m.Handle("/v1/grants/{id}", s.api(methods{http.MethodDelete: s.requireScope(apikey.Respond, s.revokeGrant)}))
	m.Handle("/v1/connections/{provider}", s.api(methods{http.MethodDelete: s.requireScope(apikey.Respond, s.disconnect)}))
	m.Handle("/v1/", s.api(notFound{}))
	m.Handle("/inbox", s.page(methods{http.MethodGet: http.HandlerFunc(s.inbox)}))
	m.Handle("/inbox/login", s.page(methods{http.MethodPost: http.HandlerFunc(s.login)}))
	m.Handle("/inbox/logout", s.page(methods{http.MethodPost: http.HandlerFunc(s.logout)}))
	m.Handle("/inbox/respond", s.page(methods{http.MethodPost: http.HandlerFunc(s.inboxRespond)}))
	m.Handle("/inbox/events", s.page(methods{http.MethodGet: http.HandlerFunc(s.inboxEvents)}))
	m.Handle("/healthz", methods{http.MethodGet: http.HandlerFunc(healthz)})
	m.Handle("/{$}", methods{http.MethodGet: http.RedirectHandler("/inbox", http.StatusSeeOther)})
	m.Handle("/", s.page(notFound{}))
	s.mux = m
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	// Link tokens travel in paths: never hand them on in a Referer.
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	// Before routing: a rebound name reaches no route, and no session
	// cookie is set for it. Liveness probes reach the process by any
	// address, and /healthz says and changes nothing.
	if r.URL.Path != "/healthz" && !s.hostAllowed(r) {
		s.traced(w, r, s.misdirected)
		return
	}
	s.traced(w, r, s.mux.ServeHTTP)
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// methods dispatches on the request method.
type methods map[string]http.Handler

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, ok := m[r.Method]
	if !ok && r.Method == http.MethodHead {
		h, ok = m[http.MethodGet]
	}
	if !ok {
		allow := ""
		for _, meth := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			if _, has := m[meth]; has {
				if allow != "" {
					allow += ", "
				}
				allow += meth
			}
		}
		w.Header().Set("Allow", allow)
		fail(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("%s does not take %s (it takes %s)", r.URL.Path, r.Method, allow))
		return
	}
	h.ServeHTTP(w, r)
}

type notFound struct{}

func (notFound) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail(w, r, http.StatusNotFound, fmt.Sprintf("there is nothing at %s", r.URL.Path))
}
