// Package devserver runs an embedded Temporal server for development: one
// process, SQLite in a file, so parked turns survive a restart of the
// whole process. It follows the shape of the server's own temporaltest
// "lite" server, which is internal to that module.
package devserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"

	"github.com/tollgate-dev/tollgate/workflows"
)

// Options configure the embedded server.
type Options struct {
	// DatabasePath is the SQLite file; empty means in memory (lost on stop).
	DatabasePath string
	// IP and Port of the frontend; defaults 127.0.0.1:7233.
	IP   string
	Port int
	// Namespaces to create if missing; default "default".
	Namespaces []string
	Logger     log.Logger
	// DynamicConfig overrides server settings (for benchmarks and tests).
	DynamicConfig dynamicconfig.StaticClient
	// SearchAttributes are registered in each namespace the server
	// creates, before it starts: every service then reads them on start,
	// where attributes added to a running server are usable only once
	// each service has refreshed the namespace.
	SearchAttributes map[string]enumspb.IndexedValueType
}

// Server is a running embedded server.
type Server struct {
	srv     temporal.Server
	address string
}

// Address is the frontend's host:port.
func (s *Server) Address() string { return s.address }

// Stop stops the server.
func (s *Server) Stop() error { return s.srv.Stop() }

// Start sets up the schema on first use and starts the server.
func Start(opts Options) (*Server, error) {
	if opts.IP == "" {
		opts.IP = "127.0.0.1"
	}
	if opts.Port == 0 {
		opts.Port = 7233
	}
	if len(opts.Namespaces) == 0 {
		opts.Namespaces = []string{"default"}
	}
	if opts.Logger == nil {
		opts.Logger = log.NewNoopLogger()
	}
	address := net.JoinHostPort(opts.IP, strconv.Itoa(opts.Port))
	if err := portFree(address); err != nil {
		return nil, err
	}
	ports, err := freePorts(8)
	if err != nil {
		return nil, err
	}
	cfg := serverConfig(opts, ports)
	sqlCfg := cfg.Persistence.DataStores[sqliteplugin.PluginName].SQL

	if opts.DatabasePath != "" {
		if err := os.MkdirAll(filepath.Dir(opts.DatabasePath), 0o700); err != nil {
			return nil, fmt.Errorf("create database directory: %w", err)
		}
		if _, err := os.Stat(opts.DatabasePath); errors.Is(err, os.ErrNotExist) {
			if err := sqlite.SetupSchema(sqlCfg); err != nil {
				return nil, fmt.Errorf("set up the SQLite schema in %s: %w", opts.DatabasePath, err)
			}
		}
	}
	var nss []*sqlite.NamespaceConfig
	for _, ns := range opts.Namespaces {
		nsCfg, err := sqlite.NewNamespaceConfig(cfg.ClusterMetadata.CurrentClusterName, ns, false, opts.SearchAttributes)
		if err != nil {
			return nil, fmt.Errorf("configure namespace %s: %w", ns, err)
		}
		nss = append(nss, nsCfg)
	}
	if err := sqlite.CreateNamespaces(sqlCfg, nss...); err != nil {
		return nil, fmt.Errorf("create namespaces: %w", err)
	}

	authorizer, err := authorization.GetAuthorizerFromConfig(&cfg.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("create authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&cfg.Global.Authorization, opts.Logger)
	if err != nil {
		return nil, fmt.Errorf("create claim mapper: %w", err)
	}
	serverOpts := []temporal.ServerOption{
		temporal.WithConfig(cfg),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithLogger(opts.Logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithStaticHosts(staticHosts(opts, ports)),
	}
	if len(opts.DynamicConfig) > 0 {
		serverOpts = append(serverOpts, temporal.WithDynamicConfigClient(opts.DynamicConfig))
	}
	srv, err := temporal.NewServer(serverOpts...)
	if err != nil {
		return nil, fmt.Errorf("create Temporal server: %w", err)
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start Temporal server: %w", err)
	}
	return &Server{srv: srv, address: address}, nil
}

func serverConfig(opts Options, ports []int) *config.Config {
	sqlCfg := config.SQL{
		PluginName:        sqliteplugin.PluginName,
		ConnectAttributes: map[string]string{"mode": "rwc", "_journal_mode": "wal", "_synchronous": "2"},
		DatabaseName:      opts.DatabasePath,
	}
	if opts.DatabasePath == "" {
		sqlCfg.ConnectAttributes = map[string]string{"mode": "memory", "cache": "shared"}
		sqlCfg.DatabaseName = fmt.Sprintf("tollgate-%d-%d", os.Getpid(), ports[0])
	}
	local := "127.0.0.1"
	svc := func(grpc, membership int, bindIP string) config.Service {
		s := config.Service{RPC: config.RPC{GRPCPort: grpc, MembershipPort: membership, BindOnLocalHost: bindIP == ""}}
		if bindIP != "" {
			s.RPC.BindOnIP = bindIP
		}
		return s
	}
	return &config.Config{
		Global: config.Global{
			Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: local},
			PProf:      config.PProf{Port: 0},
		},
		Persistence: config.Persistence{
			DefaultStore:     sqliteplugin.PluginName,
			VisibilityStore:  sqliteplugin.PluginName,
			NumHistoryShards: 1,
			DataStores:       map[string]config.DataStore{sqliteplugin.PluginName: {SQL: &sqlCfg}},
		},
		ClusterMetadata: &cluster.Config{
			FailoverVersionIncrement: 10,
			MasterClusterName:        "active",
			CurrentClusterName:       "active",
			ClusterInformation: map[string]cluster.ClusterInformation{
				"active": {Enabled: true, InitialFailoverVersion: 1, RPCAddress: net.JoinHostPort(local, strconv.Itoa(opts.Port))},
			},
		},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{
			"frontend": svc(opts.Port, ports[0], opts.IP),
			"history":  svc(ports[1], ports[2], ""),
			"matching": svc(ports[3], ports[4], ""),
			"worker":   svc(ports[5], ports[6], ""),
		},
		Archival: config.Archival{
			History:    config.HistoryArchival{State: "disabled"},
			Visibility: config.VisibilityArchival{State: "disabled"},
		},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"},
		}},
		PublicClient: config.PublicClient{HostPort: net.JoinHostPort(local, strconv.Itoa(opts.Port))},
	}
}

// staticHosts pins every service to this process. With the default
// (ringpop) membership a server restarted on the same database within 20s
// tries to join the members its previous run recorded there, on ports
// nobody listens on any more, and answers "Not enough hosts to serve the
// request" for 30s or more; the official CLI's dev server pins its hosts
// for the same reason.
func staticHosts(opts Options, ports []int) map[primitives.ServiceName]static.Hosts {
	frontend := opts.IP
	if ip := net.ParseIP(frontend); ip == nil || ip.IsUnspecified() {
		frontend = "127.0.0.1"
	}
	local := func(port int) static.Hosts {
		return static.SingleLocalHost(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	return map[primitives.ServiceName]static.Hosts{
		primitives.FrontendService: static.SingleLocalHost(net.JoinHostPort(frontend, strconv.Itoa(opts.Port))),
		primitives.HistoryService:  local(ports[1]),
		primitives.MatchingService: local(ports[3]),
		primitives.WorkerService:   local(ports[5]),
	}
}

func portFree(address string) error {
	l, err := net.Listen("tcp", address)
	if err != nil {
		return fmt.Errorf("cannot listen on %s (is another Temporal server or `make run` already running?): %w", address, err)
	}
	return l.Close()
}

// freePorts asks the kernel for n distinct free ports for the internal
// services, so several servers (tests, benchmarks) can run at once.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// FreePort returns a free loopback port for a frontend.
func FreePort() (int, error) {
	ps, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// DevDynamicConfig is what `worker --dev` runs the embedded server with;
// docs/bench-results.md measured each part.
//
// The server has a single history shard, and each of the shard's queue
// processors reads new tasks at most 20 times a second by default, so every
// workflow task waited up to 50 ms for the next read (a cluster spreads this
// over hundreds of shards). Lifting the reads took a no-op activity
// round trip from about 60 ms to about 8 ms. One task queue partition
// avoids forwarding between partitions with a single worker. A short long
// poll bounds a stall in the server's result notifications (a dropped
// notification makes a waiting client sit out the whole interval, 20 s by
// default) to 2 s.
//
// The blob size limits keep Signal floods out of history: the server
// refuses any event payload over workflows.ServerBlobSizeLimit (384 KiB,
// not the 2 MiB default), a little above the largest respond or send a
// workflow accepts. Tollgate's own payloads stay under 128 KiB (larger
// ones are stored outside history), so the limit refuses only what no
// turn or session could take.
func DevDynamicConfig() dynamicconfig.StaticClient {
	return dynamicconfig.StaticClient{
		dynamicconfig.BlobSizeLimitError.Key():                  workflows.ServerBlobSizeLimit,
		dynamicconfig.BlobSizeLimitWarn.Key():                   workflows.ServerBlobSizeWarn,
		dynamicconfig.TransferProcessorMaxPollRPS.Key():         10000,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():            10000,
		dynamicconfig.VisibilityProcessorMaxPollRPS.Key():       10000,
		dynamicconfig.OutboundProcessorMaxPollRPS.Key():         10000,
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
		dynamicconfig.HistoryLongPollExpirationInterval.Key():   2 * time.Second,
	}
}
