// Package tollgate runs LLM agent turns as Temporal workflows in your own
// worker. One value, the Plugin, enables it: on a client it configures the
// payload storage that keeps large tool outputs and conversations out of
// history, and on every worker made from that client (or given the plugin
// directly) it registers the AgentTurn workflow and its activities with
// your tools and model providers. Client starts, answers and reads turns
// from Go.
//
//	p, err := tollgate.NewPlugin(tollgate.Options{Tools: []tool.Tool{refund}})
//	c, err := client.Dial(client.Options{Plugins: []client.Plugin{p}})
//	w := worker.New(c, tollgate.DefaultTaskQueue, worker.Options{})
//
// The wire contract (workflow, Update, Signal and Query names, payloads)
// lives in package workflows; outcomes and cards in package results; the
// tool SDK in package tool.
package tollgate

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/storage/blobstore"
	"github.com/tollgate-dev/tollgate/storage/codec"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/storage/payloadstore"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// DefaultTaskQueue is the task queue turns run on unless you choose one.
const DefaultTaskQueue = workflows.DefaultTaskQueue

// PluginName is the plugin's name as the SDK reports it.
const PluginName = "tollgate"

// Provider is a model provider: see package model.
type Provider = model.Provider

// Options configure Tollgate for a worker, its clients and its replayers.
// The zero value is a worker with every built-in tool, the built-in model
// providers configured from nothing (set Models, or use
// providers.LoadConfigFromEnv), data in ".tollgate" and the workspace in
// "workspace".
type Options struct {
	// DataDir holds connection tokens and, unless BlobURL says otherwise,
	// stored payloads, transcripts and large tool outputs; it must not
	// overlap the workspace. Clients and replayers that read a worker's
	// turns need the same directory, or the same BlobURL.
	DataDir string
	// BlobURL chooses where stored payloads, large tool outputs and
	// transcripts live (file://, s3://, gs://, azblob://; see
	// storage/blobstore). Empty means TOLLGATE_BLOB_URL, then DataDir.
	// Every worker, client and replayer of a deployment needs the same
	// one. Connection tokens never go there: they stay in DataDir.
	BlobURL string
	// ConversationCacheBytes bounds the decoded conversations a worker
	// keeps between model calls: long ones up to this many bytes as
	// stored, and the most recent short ones within a quarter of it. A
	// model call then reads from the store only what another worker
	// stored. Zero is 32 MiB; negative keeps none, so every model call
	// reads its whole conversation from the store, as a worker just
	// restarted does.
	ConversationCacheBytes int64
	// Workspace confines the file and shell tools.
	Workspace string

	// Tools are your own tools, registered beside the built-ins.
	Tools []tool.Tool
	// ToolSources are groups of tools that change while the worker runs
	// (an *mcp.Toolset): their tools are registered as Tools are, and
	// replaced when the group changes; turns started after a change see
	// it.
	ToolSources []tool.Source
	// Builtins names the built-in tools to offer; nil offers all of them.
	Builtins []string
	// NoBuiltins offers none of the built-in tools.
	NoBuiltins bool

	// Models configures the built-in providers (openai:, ollama:,
	// anthropic:, scripted:).
	Models providers.Config
	// Providers are model providers of your own, by the prefix of their
	// model strings: Providers["acme"] answers "acme:model-7".
	Providers map[string]Provider

	// Connections stores users' account tokens; nil keeps them in a file
	// store in DataDir.
	Connections connections.Store
	// HTTPClient is what http_fetch and list_issues use; nil is a default.
	HTTPClient *http.Client
	// FetchAllow opens internal destinations to http_fetch: hosts,
	// host:port pairs, IPs or CIDRs.
	FetchAllow []string
	// ShellEnv names environment variables the shell tool passes on.
	ShellEnv []string
	// GitHubAPIURL is the GitHub REST API list_issues calls: GitHub
	// Enterprise's, or a test provider's; empty is api.github.com.
	GitHubAPIURL string

	// SearchAttributes says the server has Tollgate's search attributes
	// registered (see MissingSearchAttributes), so turns keep them
	// current. Off, turns write none: a server without them would fail
	// every workflow task that tried.
	SearchAttributes bool
	// Webhooks, with receiver URLs, has turns announce waits, decisions
	// and their end to them (see webhook.FromEnv).
	Webhooks webhook.Options

	// Codec encrypts with AES-256-GCM what turns leave behind: payloads
	// in history and the payload store, transcripts, stored tool outputs
	// and connection tokens (see storage/codec). Nil reads the keys file
	// TOLLGATE_CODEC_KEYS_FILE names; with that unset too, nothing is
	// encrypted. Every client, worker and replayer of the same turns
	// needs the same keys: the plugin sets them on the clients and
	// replayers it configures.
	Codec *codec.Keyring

	// Events receives the turns' live events: text as the model writes
	// it, tool calls, card and status changes, results (see
	// docs/streaming.md). Nil streams nothing; turns run the same.
	Events stream.Publisher

	// Rules are the worker's approval rules (docs/approvals.md), on top
	// of each tool's approval default; policy.Load reads them from a
	// file. They are compiled and type-checked against every tool's
	// argument schema by NewPlugin, whose error then names the rule.
	Rules []policy.Rule
	// Agents are named agents turns and sessions can run by name, call as
	// tools (agent:<name>) and hand off to (see docs/agents.md).
	// NewPlugin checks that every tool, agent and handoff they name
	// exists.
	Agents []workflows.Agent
}

// features are what the options offer workflows.
func (o Options) features() workflows.Features {
	return workflows.Features{SearchAttributes: o.SearchAttributes, Webhooks: len(o.Webhooks.URLs) > 0, Events: o.Events}
}

func (o Options) withDefaults() Options {
	if o.DataDir == "" {
		o.DataDir = datadir.Default
	}
	if o.BlobURL == "" {
		o.BlobURL = blobstore.URLFromEnv(os.Getenv)
	}
	if o.Workspace == "" {
		o.Workspace = "workspace"
	}
	return o
}

// Plugin is both a client plugin and a worker plugin. On a client it sets
// the external payload storage; on a worker it registers the workflow and
// the activities; on a workflow replayer it does both (workflow only).
type Plugin struct {
	*temporal.SimplePlugin
	acts     *activities.Activities
	features workflows.Features
	// webhooks delivers webhook events; nil without receivers.
	webhooks *webhook.Deliverer
	storage  converter.ExternalStorage
	// codec encrypts payloads; nil when encryption is off.
	codec *codec.Keyring
	// skippedRules says which approval rules name tools the worker does
	// not offer.
	skippedRules []string
	// registered holds the instance keys of the workers and replayers the
	// plugin has registered on: a replayer runs the plugin before every
	// history, and registering twice panics.
	registered sync.Map
}

var (
	_ client.Plugin = (*Plugin)(nil)
	_ worker.Plugin = (*Plugin)(nil)
)

// Registry is what the plugin registers on: a worker's, a replayer's, or
// the SDK's test environment.
type Registry interface {
	RegisterWorkflowWithOptions(any, workflow.RegisterOptions)
	RegisterActivityWithOptions(any, activity.RegisterOptions)
}

// NewPlugin builds the activities and opens the stores in the data
// directory. Its errors say which option is wrong.
func NewPlugin(opts Options) (*Plugin, error) {
	opts = opts.withDefaults()
	if err := checkApart(opts); err != nil {
		return nil, err
	}
	keys, err := keysFor(opts.Codec)
	if err != nil {
		return nil, err
	}
	opts.Codec = keys
	blobs, err := openBlobs(opts.BlobURL, opts.DataDir, opts.Codec)
	if err != nil {
		return nil, err
	}
	acts, err := newActivities(opts, blobs)
	if err != nil {
		return nil, err
	}
	p, err := newPlugin(blobs, acts, opts.Codec)
	if err != nil {
		return nil, err
	}
	p.features = opts.features()
	if len(opts.Rules) > 0 {
		rules, err := newLiveRules(opts.Rules, acts.Tools)
		if err != nil {
			return nil, err
		}
		p.features.Rules, p.features.Policy, p.skippedRules = true, rules, rules.start.Skipped
	}
	if len(opts.Agents) > 0 {
		if err := workflows.ValidateAgents(opts.Agents, func(name string) bool { _, ok := acts.Tools.Get(name); return ok }); err != nil {
			return nil, fmt.Errorf("tollgate: %w", err)
		}
		p.features.Agents = map[string]workflows.Agent{}
		for _, a := range opts.Agents {
			p.features.Agents[a.Name] = a
		}
	}
	if p.features.Webhooks {
		if p.webhooks, err = webhook.New(opts.Webhooks); err != nil {
			return nil, fmt.Errorf("tollgate: %w", err)
		}
	}
	return p, nil
}

// NewClientPlugin is the plugin for a program that starts, answers or
// replays turns but runs none: it sets the payload storage of the blob
// store TOLLGATE_BLOB_URL names, or else of dataDir (empty means
// TOLLGATE_DATA or ".tollgate"), on clients and replayers, and registers
// AgentTurn on replayers. Workers made from its client get nothing from
// it. Payloads are encrypted with the keys TOLLGATE_CODEC_KEYS_FILE
// names, if set.
func NewClientPlugin(dataDir string) (*Plugin, error) {
	keys, err := keysFor(nil)
	if err != nil {
		return nil, err
	}
	return NewClientPluginWith(dataDir, keys)
}

// NewClientPluginWith is NewClientPlugin with the payload codec's keys
// given; nil encrypts nothing.
func NewClientPluginWith(dataDir string, keys *codec.Keyring) (*Plugin, error) {
	if dataDir == "" {
		dataDir = datadir.FromEnv(os.Getenv)
	}
	blobs, err := openBlobs(blobstore.URLFromEnv(os.Getenv), dataDir, keys)
	if err != nil {
		return nil, err
	}
	return newPlugin(blobs, nil, keys)
}

// openBlobs opens the blob store url names, or the one in dataDir; with
// keys, what it stores is sealed.
func openBlobs(url, dataDir string, keys *codec.Keyring) (*blobstore.Store, error) {
	o := blobstore.Options{URL: url, DataDir: dataDir}
	if keys != nil {
		o.Sealer = keys
	}
	blobs, err := blobstore.Open(context.Background(), o)
	if err != nil {
		return nil, fmt.Errorf("tollgate: open the payload store: %w", err)
	}
	return blobs, nil
}

func newPlugin(blobs *blobstore.Store, acts *activities.Activities, keys *codec.Keyring) (*Plugin, error) {
	storage := payloadstore.NewDriver(blobs).Storage()
	p := &Plugin{acts: acts, storage: storage, codec: keys}
	var err error
	p.SimplePlugin, err = temporal.NewSimplePlugin(temporal.SimplePluginOptions{
		Name: PluginName,
		ConfigureClient: func(_ context.Context, o client.PluginConfigureClientOptions) error {
			o.ClientOptions.ExternalStorage = metrics.CountStorage(p.storage, o.ClientOptions.MetricsHandler)
			o.ClientOptions.DataConverter = p.withCodec(o.ClientOptions.DataConverter)
			return nil
		},
		ConfigureWorkflowReplayer: func(_ context.Context, o worker.PluginConfigureWorkflowReplayerOptions) error {
			o.WorkflowReplayerOptions.ExternalStorage = p.storage
			o.WorkflowReplayerOptions.DataConverter = p.withCodec(o.WorkflowReplayerOptions.DataConverter)
			return nil
		},
		RunContextBefore: func(_ context.Context, o temporal.SimplePluginRunContextBeforeOptions) error {
			if _, done := p.registered.LoadOrStore(o.InstanceKey, true); done {
				return nil
			}
			switch {
			case o.WorkflowReplayer:
				registerReplayer(o.Registry)
			case p.acts != nil:
				p.Register(o.Registry)
			}
			return nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("tollgate: build the plugin: %w", err)
	}
	return p, nil
}

// SkippedRules says which approval rules name tools this worker does not
// offer; a policy file may serve several kinds of worker, so they are
// not errors, but a worker logs them.
func (p *Plugin) SkippedRules() []string { return p.skippedRules }

// ExternalStorage is the payload storage the plugin sets on clients and
// replayers, for code that builds their options by hand.
func (p *Plugin) ExternalStorage() converter.ExternalStorage { return p.storage }

// Workspace is the workspace directory the file and shell tools are
// confined to, absolute and free of symbolic links; empty for a client
// plugin.
func (p *Plugin) Workspace() string {
	if p.acts == nil {
		return ""
	}
	return p.acts.Workspace
}

// Register registers AgentTurn and its activities (none for a client
// plugin) on r directly, for registries a plugin cannot reach: the SDK's
// testsuite environment.
func (p *Plugin) Register(r Registry) {
	if p.acts == nil {
		registerReplayer(r)
		return
	}
	register(r, p.features, p.acts)
	if p.webhooks != nil {
		p.webhooks.Register(r)
	}
}
