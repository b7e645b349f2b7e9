package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/stream"
)

// Features are what the worker's deployment offers a workflow: whether the
// server has Tollgate's search attributes registered, and whether
// receivers want webhook events. They differ between deployments, so a
// workflow reads them once, through a SideEffect, and keeps what it read
// for its whole history: a worker with other settings replays it as it
// ran.
type Features struct {
	// SearchAttributes: the server has every name in SearchAttributes()
	// registered, so workflows keep them current.
	SearchAttributes bool `json:"search_attributes,omitempty"`
	// Webhooks: the worker delivers webhook events, so turns emit them.
	Webhooks bool `json:"webhooks,omitempty"`
	// WorkspaceQueue is the task queue of the worker that holds its
	// workspace (tollgate.PinWorkspace): a turn sends its workspace tools'
	// calls there. Empty: the workspace is shared (or there is one
	// worker), and any worker runs them. See doc.go, "Workspace affinity".
	WorkspaceQueue string `json:"workspace_queue,omitempty"`
	// ModelQueues maps a model provider's prefix ("openai") to the task
	// queue its CallModel activities go to (tollgate.RouteModelCalls), so
	// that the server's per-queue rate limit caps that provider's calls
	// across the fleet. A provider without an entry stays on the turn's
	// queue.
	ModelQueues map[string]string `json:"model_queues,omitempty"`
	// Rules: the worker has approval rules (Features.Policy), so each
	// step's calls are decided by them, once, in a SideEffect
	// (rules.go). Recorded, so a turn that started with rules keeps
	// asking them and one that started without never does.
	Rules bool `json:"rules,omitempty"`
	// Events receives the turns' live events (workflows/events.go); it is
	// this worker's and never recorded.
	Events stream.Publisher `json:"-"`
	// Policy is this worker's compiled approval rules. Workflow code
	// reads it only inside the SideEffect that records its decisions.
	Policy RuleSet `json:"-"`
	// Agents are the worker's named agents by name. A turn records the
	// ones it uses when it starts (resolveAgents), so they are never
	// recorded here.
	Agents map[string]Agent `json:"-"`
}

// RuleSet decides a tool call by the worker's approval rules
// (*policy.Set).
type RuleSet interface {
	Decide(policy.Call) policy.Decision
}

// outsideVersion of the turn's change marker adds what outside systems
// read: the recorded features, search attributes (search.go) and webhook
// events (webhook.go).
const outsideVersion = uiVersion + 1

// fastToolsVersion of the turn's change marker runs the calls of local
// tools (tool.Spec.RunsLocally) as local activities and sends the calls
// of workspace tools to the worker holding the workspace
// (Features.WorkspaceQueue). See doc.go.
const fastToolsVersion = outsideVersion + 1

// record returns the features this run was started with, the same on
// every replay.
func (f Features) record(ctx workflow.Context) Features {
	var got Features
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return f }).Get(&got); err != nil {
		// A SideEffect value is what this code wrote; failing to decode
		// it means the history is not ours. Run without the features.
		workflow.GetLogger(ctx).Warn("Recorded features unreadable; running without them", "error", err)
		return Features{}
	}
	return got
}
