package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// AgentTurn runs one agent turn: model, tools, people, until a final
// answer, a transfer, max_steps or cancellation.
func AgentTurn(ctx workflow.Context, in Input) (Result, error) {
	return Features{}.AgentTurn(ctx, in)
}

// AgentTurn is the AgentTurn workflow on a deployment with these
// features.
func (f Features) AgentTurn(ctx workflow.Context, in Input) (Result, error) {
	if in.Resolved != nil && in.Continued == nil {
		return Result{}, temporal.NewNonRetryableApplicationError("invalid turn input: resolved is what a turn records of its agents; a new turn leaves it empty", ErrTypeInvalidInput, nil)
	}
	if in.Resolved == nil && usesAgents(in) {
		// Only turns that use agents take the version marker this early,
		// so the histories of all others keep their order of events.
		if workflow.GetVersion(ctx, hardeningChange, workflow.DefaultVersion, latestTurnVersion) < agentsVersion {
			return Result{}, temporal.NewNonRetryableApplicationError("invalid turn input: this turn started before agents existed", ErrTypeInvalidInput, nil)
		}
		var err error
		if in, err = f.resolveAgents(ctx, in); err != nil {
			return Result{}, temporal.NewNonRetryableApplicationError("invalid turn input: "+err.Error(), ErrTypeInvalidInput, nil)
		}
	}
	if err := validateInput(in); err != nil {
		return Result{}, temporal.NewNonRetryableApplicationError("invalid turn input: "+err.Error(), ErrTypeInvalidInput, nil)
	}
	t := &turn{in: in, status: StatusRunning}
	if err := t.setup(ctx, f); err != nil {
		t.setupFailed(ctx, err)
		return Result{}, err
	}
	return t.run(ctx)
}

// hardeningChange versions the behaviour added against a hostile model
// and hostile responders: calls per step capped, response fields bounded,
// the history guard, transfers ending waits, named tool activities and
// cancellations that tell a queued or unstarted call from a running one.
// Version 2 (uiVersion) adds activity summaries; version 3
// (outsideVersion) the search attributes and webhook events; version 4
// (fastToolsVersion) local tools and workspace affinity; version 5
// (checkedVersion) refuses respond payloads over MaxRespondBytes and text
// that is not UTF-8; version 6 (setupFailedVersion) ends a turn that
// fails in setup as failed, with its reason; version 7 (longTurnsVersion)
// continues a grown turn as new; version 8 (modelQueuesVersion) sends
// model calls to their provider's queue when the deployment has one;
// version 9 (compactionVersion) compacts a conversation that nears the
// model's context window and reports each model call's usage; version 10
// (agentsVersion) runs named agents, agents as tools and handoffs
// (agents.go); version 11 (rulesVersion) applies the worker's approval
// rules; version 12 (grantsVersion) remembers approvals as grants
// (grants.go); version 17 (scriptedWindowVersion) gives scripted models
// a context window (compaction.go); version 18 (inlineTailVersion) lets
// model calls leave a short tail of the conversation unstored (tail.go);
// version 19 (toolsRefVersion) sends the tool definitions with the first
// model call only (toolsref.go); version 20 (childWaitsVersion) receives
// child turns' waits only in a turn that calls agents (agents.go).
// Turns that started before a version
// replay as they ran.
const (
	hardeningChange  = "hardening"
	hardeningVersion = 1
)

// turn is the workflow's state. Everything in it is driven by workflow
// events only, so it rebuilds identically on replay.
type turn struct {
	in Input
	id string
	v  workflow.Version
	// ui is set for turns that summarise their activities for the UI.
	ui bool
	// features are the deployment's, as recorded when the turn started.
	features Features
	// live are the features of the worker running this workflow task.
	// Workflow code reads them only inside a SideEffect (repin), which
	// records what it read.
	live Features
	// pin is the task queue of the worker holding the turn's workspace;
	// empty: any worker runs workspace tools (doc.go, "Workspace
	// affinity").
	pin string
	// listed is what the search attributes say; deliveries counts webhook
	// deliveries not yet started.
	listed     listing
	deliveries int
	specs      map[string]tool.Spec
	schemas    map[string]*tool.Schema
	defs       []model.ToolDef
	// toolsRef names defs as a model call stored them; "" until one has
	// (toolsref.go).
	toolsRef string

	status Status
	step   int
	calls  []*call
	// byID and nextSuffix make call id lookup and de-duplication constant
	// time: a reply may carry thousands of calls sharing one id.
	byID       map[string]*call
	nextSuffix map[string]int
	conv       []results.Message
	firstNew   int
	// head names the stored conversation conv[:sent]; conv[sent:replyAt]
	// are messages model calls read but left unstored (tail.go).
	head    string
	sent    int
	replyAt int

	workDir   string
	usage     model.Usage
	text      string
	transfer  *results.Transfer
	failure   string
	exclusive bool

	invalidSignals    int
	lastInvalidSignal string

	// A turn that continued as new: cont is what the run before handed on,
	// runsBefore the earlier runs, first the turn-wide index of calls[0],
	// carried the unfinished step's calls; recent, earlier and earlierIDs
	// stand for the calls of earlier runs. handedOn counts the calls this
	// run handed to the next (calls[len(calls)-handedOn:]).
	cont       *Continued
	runsBefore []RunCards
	first      int
	carried    []*call
	recent     []results.Card
	earlier    CardCounts
	earlierIDs idSet
	handedOn   int
	// steps counts this run's model calls.
	steps int

	// budget is the turn's budget as people raised it; toolCalls counts
	// the model's calls; startedAt is when the turn's first run began.
	budget      Budget
	budgetWaits int
	toolCalls   int
	startedAt   time.Time
	lastSpent   Spent
	// cost sums the priced model calls; unpriced counts the others, and
	// unpricedOK says a person let the turn go on not knowing their cost.
	cost       float64
	unpriced   int
	unpricedOK bool

	// stop cancels the turn's run from inside (the history guard);
	// stopReason then says why, where a cancellation would say "cancelled".
	stop       workflow.CancelFunc
	stopReason string
	events     *liveEvents

	// agentTools and handoffTools map the tool names of the turn's agents
	// and handoffs to the agent; childSteps counts the model calls of the
	// agents it called; toldCaller is the waits last sent to the caller.
	agentTools   map[string]string
	handoffTools map[string]string
	childSteps   int
	toldCaller   string
	// full is the head of the whole conversation once the turn compacted
	// (head then names the compacted one); compactions counts them;
	// justCompacted is set from a compaction to the next model reply;
	// compactFailed is the step a compaction last failed at.
	full          string
	compactions   int
	justCompacted bool
	compactFailed int
	// contextTokens is the last model call's input and output tokens: how
	// much of the context window the conversation fills.
	contextTokens int
	lastCall      *ModelCallUsage
	// session is the session's budget for a turn of a session that has
	// one (Input.SessionBudget), its limit as people raised it.
	session          *SessionBudget
	lastSessionSpent Spent
	// grantSession is the session a session grant made in this turn
	// holds for (setupGrants).
	grantSession string
}

func (t *turn) hardened() bool { return t.v >= hardeningVersion }

// checkedVersion of the turn's change marker bounds a respond payload's
// size as a whole and refuses text in it that is not UTF-8.
const checkedVersion = fastToolsVersion + 1

func (t *turn) checked() bool { return t.v >= checkedVersion }

// setupFailedVersion of the turn's change marker ends a turn that fails
// in setup (a tool the worker does not offer, say) the way every other
// turn ends: failed with its reason in the state query, the search
// attributes, the metrics and the turn.ended event. Before it, setup had
// already listed the turn as running, and it stayed so.
const setupFailedVersion = checkedVersion + 1

// modelQueuesVersion of the turn's change marker schedules CallModel on
// the task queue recorded for the model's provider
// (Features.ModelQueues), where the server rate-limits it.
const modelQueuesVersion = longTurnsVersion + 1

// rulesVersion of the turn's change marker decides each call by the
// worker's approval rules (rules.go), once, recorded in a SideEffect, and
// enforces their groups, quorums, separation of duties and escalation.
// Versions 9 (compaction) and 10 (agents) are being added in parallel.
const rulesVersion = modelQueuesVersion + 3

// latestTurnVersion is what a new turn records. Both places that read
// the marker (AgentTurn, for turns that name agents, and setup) ask with
// it: the marker is recorded once, so a lower maximum at the first would
// hold a new turn below every later version.
const latestTurnVersion = childWaitsVersion

// childBudgetVersion of the turn's change marker hands a called agent the
// caller's remaining budget, so a child cannot spend past its caller's
// limits, and tells the caller's model which of the child's calls ended
// with their outcome unknown (agents.go).
const childBudgetVersion = rulesVersion + 3

// fast reports whether the turn runs local tools locally and pins its
// workspace tools (fastToolsVersion).
func (t *turn) fast() bool { return t.v >= fastToolsVersion }

func (t *turn) setup(ctx workflow.Context, f Features) error {
	t.id = workflow.GetInfo(ctx).WorkflowExecution.ID
	t.v = workflow.GetVersion(ctx, hardeningChange, workflow.DefaultVersion, latestTurnVersion)
	t.ui = t.v >= uiVersion
	t.byID = map[string]*call{}
	t.nextSuffix = map[string]int{}
	t.earlierIDs = idSet{}
	t.budget, t.startedAt = t.in.Policy.Budget, workflow.Now(ctx)
	if c := t.in.Caller; c != nil && c.Budget != nil && t.in.Continued == nil && t.v >= childBudgetVersion {
		// A called agent spends at most what its caller had left.
		t.budget = tighter(t.budget, *c.Budget)
		if t.in.Policy.OnBudget == "" {
			t.in.Policy.OnBudget = c.OnBudget
		}
	}
	t.setupGrants(ctx)
	if sb := t.in.SessionBudget; sb != nil && t.compacting() {
		copied := *sb
		t.session = &copied
	}
	if t.in.Continued != nil {
		if !t.long() {
			return temporal.NewNonRetryableApplicationError("invalid turn input: continued is what a turn hands its next run, and this worker's turns do not continue as new", ErrTypeInvalidInput, nil)
		}
		if err := checkContinued(t.in); err != nil {
			return temporal.NewNonRetryableApplicationError("invalid turn input: "+err.Error(), ErrTypeInvalidInput, nil)
		}
	}
	switch {
	case t.in.Continued != nil:
		t.live = f
	case t.v >= outsideVersion:
		t.features = f.record(ctx)
		if t.fast() {
			t.live = f
			t.pin = t.features.WorkspaceQueue
			if t.pin != "" && t.in.Workspace != "" {
				t.continueIn(ctx, t.in.Workspace)
			}
		}
	}
	if err := workflow.SetQueryHandler(ctx, StateQuery, func() (State, error) {
		return t.snapshot(), nil
	}); err != nil {
		return fmt.Errorf("register state query: %w", err)
	}
	if t.long() {
		if err := workflow.SetQueryHandler(ctx, CardsQuery, t.cardsPage); err != nil {
			return fmt.Errorf("register cards query: %w", err)
		}
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, RespondName, t.onUpdate, workflow.UpdateHandlerOptions{
		Validator: t.validateUpdate,
	}); err != nil {
		return fmt.Errorf("register respond update: %w", err)
	}
	if err := t.registerReevaluate(ctx); err != nil {
		return err
	}
	if c := t.in.Continued; c != nil {
		// Before the Signals are read: a Signal may name a carried call.
		if err := t.describeCarried(c); err != nil {
			return err
		}
	}
	workflow.Go(ctx, t.receiveSignals)
	t.indexAgents()
	if t.receivesChildWaits() {
		workflow.Go(ctx, t.receiveChildWaits)
	}
	t.startEvents(ctx, f)
	t.publish(ctx)

	t.conv = append(t.conv, t.in.Messages...)
	t.firstNew = len(t.conv)
	if t.cont != nil {
		// The result shows the reply the run continues after.
		t.firstNew = 0
	}
	// A turn that continues a stored conversation holds only what follows
	// its head: conv[:0] is stored, so the first call sends all of conv.
	if err := checkHead(t.in.Head); err != nil {
		return temporal.NewNonRetryableApplicationError("invalid turn input: "+err.Error(), ErrTypeInvalidInput, nil)
	}
	t.head = t.in.Head
	if t.in.Prompt != "" {
		t.conv = append(t.conv, results.UserText(t.in.Prompt))
	}
	if t.cont != nil {
		return nil
	}
	return t.describeTools(ctx)
}

// describeCarried takes up the tools and state the run before handed on.
func (t *turn) describeCarried(c *Continued) error {
	t.specs = map[string]tool.Spec{}
	t.schemas = map[string]*tool.Schema{}
	for _, s := range c.Specs {
		if err := t.addSpec(s); err != nil {
			return err
		}
	}
	if err := t.restore(c); err != nil {
		return temporal.NewNonRetryableApplicationError("invalid turn input: continued: "+err.Error(), ErrTypeInvalidInput, nil)
	}
	return nil
}

// describeTools records the worker's tool specs in history, so approval
// defaults, retries and timeouts stay fixed for the turn even if the
// worker is redeployed with different ones mid-turn.
func (t *turn) describeTools(ctx workflow.Context) error {
	t.specs = map[string]tool.Spec{}
	t.schemas = map[string]*tool.Schema{}
	names := t.in.Tools
	if t.in.Resolved != nil {
		// Agents run in the workflow, not on a worker's registry.
		names = slices.DeleteFunc(slices.Clone(names), func(s string) bool { return strings.HasPrefix(s, AgentToolPrefix) })
	}
	if len(names) > 0 {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			ScheduleToCloseTimeout: time.Minute,
			RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 3},
		})
		var specs []tool.Spec
		if err := workflow.ExecuteLocalActivity(lctx, activities.DescribeToolsName, names).Get(ctx, &specs); err != nil {
			return fmt.Errorf("describe tools: %w", err)
		}
		for _, s := range specs {
			if err := t.addSpec(s); err != nil {
				return err
			}
		}
	}
	return t.describeAgents()
}

func (t *turn) addSpec(s tool.Spec) error {
	schema, err := tool.CompileShared(s.Schema)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("tool %s has a schema that does not compile: %v", s.Name, err), ErrTypeInvalidInput, nil)
	}
	t.specs[s.Name] = s
	t.schemas[s.Name] = schema
	t.defs = append(t.defs, model.ToolDef{Name: s.Name, Description: s.Description, Schema: s.Schema})
	return nil
}

func (t *turn) run(ctx workflow.Context) (Result, error) {
	maxSteps := t.in.MaxSteps
	if maxSteps == 0 {
		maxSteps = DefaultMaxSteps
	}
	if t.hardened() {
		ctx, t.stop = workflow.WithCancel(ctx)
		workflow.Go(ctx, t.guardHistory)
	}
	if len(t.carried) > 0 {
		if t.runStep(ctx, t.carried) {
			return Result{}, t.continueAsNew(ctx, t.carried)
		}
		if err := t.endStep(ctx, t.carried); err != nil {
			return Result{}, err
		}
	}
	for t.status == StatusRunning {
		if t.step == maxSteps {
			t.status = StatusMaxSteps
			break
		}
		if t.steps > 0 && ctx.Err() == nil && t.tailDue(ctx) {
			t.storeTail(ctx)
		}
		if t.steps > 0 && t.grown(ctx) && ctx.Err() == nil {
			return Result{}, t.continueAsNew(ctx, nil)
		}
		if !t.checkBudget(ctx) {
			if ctx.Err() != nil {
				t.interrupted()
			} else {
				t.status = StatusBudgetExhausted
			}
			break
		}
		t.step++
		t.steps++
		if t.compacting() {
			t.compactBeforeCall(ctx)
		}
		reply, err := t.callModel(ctx)
		failure := ""
		if err != nil && t.compacting() && contextLength(err) && ctx.Err() == nil {
			reply, err, failure = t.retryShorter(ctx, err)
		}
		if err != nil {
			if ctx.Err() != nil {
				t.interrupted()
			} else {
				t.status = StatusFailed
				t.failure = modelFailure(err)
				if failure != "" {
					t.failure = failure
				}
			}
			break
		}
		if text := reply.Text(); text != "" {
			t.text = text
		}
		if len(reply.ToolCalls) == 0 {
			t.status = StatusCompleted
			break
		}
		step := t.startCalls(ctx, reply.ToolCalls)
		if t.runStep(ctx, step) {
			return Result{}, t.continueAsNew(ctx, step)
		}
		if err := t.endStep(ctx, step); err != nil {
			return Result{}, err
		}
	}
	return t.finish(ctx)
}

// endStep gives the model the step's results and says what the step's
// end means for the turn.
func (t *turn) endStep(ctx workflow.Context, step []*call) error {
	if err := t.appendToolMessages(step); err != nil {
		return err
	}
	switch {
	case ctx.Err() != nil:
		t.interrupted()
	case t.transfer != nil:
		t.status = StatusTransferred
	}
	return nil
}

// interrupted ends a turn whose run was cancelled: by the caller, or by the
// history guard, which is a failure with its reason.
func (t *turn) interrupted() {
	if t.stopReason != "" {
		t.status, t.failure = StatusFailed, t.stopReason
		return
	}
	t.status = StatusCancelled
}

// interruption says, for a call's card, what ended the turn's run.
func (t *turn) interruption() string {
	if t.stopReason != "" {
		return "the turn was ended because its history grew too large"
	}
	return "the turn was cancelled"
}

// setupFailed ends a turn whose setup failed as failed, with why; the
// workflow still fails with err.
func (t *turn) setupFailed(ctx workflow.Context, err error) {
	if t.v < setupFailedVersion {
		return
	}
	t.status, t.failure = StatusFailed, "the turn could not start: "+sentence(err)
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	if err := t.announceEnd(dctx); err != nil {
		workflow.GetLogger(ctx).Warn("Failed turn not announced", "error", err)
	}
}

// announceEnd tells outside systems how the turn ended (search
// attributes, metrics, the turn.ended event) and lets every update
// handler and webhook delivery finish.
func (t *turn) announceEnd(ctx workflow.Context) error {
	t.publish(ctx)
	t.streamEnd(ctx)
	t.countEnd(ctx)
	t.emit(ctx, webhook.TypeTurnEnded, "", nil)
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) && t.deliveries == 0 }); err != nil {
		return fmt.Errorf("wait for respond handlers and webhook deliveries: %w", err)
	}
	return nil
}

// finish lets every update handler return before the turn does, and
// counts signals that arrived too late to matter.
func (t *turn) finish(ctx workflow.Context) (Result, error) {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	// The result's head covers the conversation through the last reply.
	t.storeTail(dctx)
	if err := t.announceEnd(dctx); err != nil {
		return Result{}, err
	}
	ch := workflow.GetSignalChannel(dctx, RespondName)
	for {
		var payload converter.RawValue
		if !ch.ReceiveAsync(&payload) {
			break
		}
		t.rejectSignal(fmt.Sprintf("the turn has ended (%s)", t.status))
	}
	cards, omitted := t.shownCards()
	return Result{
		Status:         t.status,
		Text:           t.text,
		Messages:       t.conv[t.firstNew:],
		Head:           t.head,
		Cards:          cards,
		Omitted:        omitted,
		Transfer:       t.transfer,
		Error:          t.failure,
		Steps:          t.step,
		Usage:          t.usage,
		Budget:         t.budgetState(),
		Cost:           t.cost,
		UnpricedCalls:  t.unpriced,
		InvalidSignals: t.invalidSignals,
		Workspace:      t.pin,
		FullHead:       t.fullHead(),
		Compactions:    t.compactions,
		ToolCalls:      t.shownToolCalls(),
		SessionBudget:  t.sessionBudgetState(workflow.Now(dctx)),
	}, nil
}

// modelOptions are the activity options of a call to the turn's model.
func (t *turn) modelOptions(summary string) workflow.ActivityOptions {
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    2 * time.Minute,
			MaximumAttempts:    10,
		},
	}
	if t.hardened() {
		// CallModel heartbeats while the provider thinks, so a worker lost
		// mid-call is noticed in seconds, not at the 5-minute timeout.
		opts.HeartbeatTimeout = activities.CallModelHeartbeatTimeout
	}
	if t.ui {
		opts.Summary = summary
	}
	if t.v >= modelQueuesVersion {
		provider, _, _ := strings.Cut(t.in.Model, ":")
		opts.TaskQueue = t.features.ModelQueues[provider]
	}
	return opts
}

// callModel sends only the messages added since the last call; the
// activity keeps the rest in the transcript store under t.head.
func (t *turn) callModel(ctx workflow.Context) (results.Message, error) {
	opts := t.modelOptions(fmt.Sprintf("CallModel %s step %d", t.in.Model, t.step))
	actx := workflow.WithActivityOptions(ctx, opts)
	in := activities.CallModelInput{
		TurnID:     t.id,
		Model:      t.in.Model,
		System:     t.in.System,
		Transcript: t.head,
		Messages:   t.conv[t.sent:],
		Params:     t.in.Params,
		Step:       t.step, Session: t.streamSession(),
		Full: t.full,
	}
	if t.offersInlineTail() {
		in.InlineTail = activities.InlineTailBytes
	}
	t.offerTools(&in)
	var res activities.CallModelResult
	err := t.runCallModel(ctx, actx, &in, &res)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeTranscriptMissing {
		if t.partial() {
			// Resending "the whole conversation" would drop everything
			// before the head, which this turn never held.
			return results.Message{}, headMissing()
		}
		workflow.GetLogger(ctx).Warn("Stored conversation missing; resending it whole")
		// The whole conversation this run holds becomes the head again.
		in.Transcript, in.Messages, in.Full = "", t.conv, ""
		t.full = ""
		err = t.runCallModel(ctx, actx, &in, &res)
	}
	if err != nil {
		return results.Message{}, err
	}
	if res.ToolsRef != "" {
		t.toolsRef = res.ToolsRef
	}
	reply := res.Response.Message
	reply.Role = results.RoleAssistant
	if res.Transcript == "" && t.partial() {
		// Sending the conversation whole is no fallback here either; the
		// reply is not kept, so Head still covers all but the unstored tail.
		t.usage.InputTokens += res.Response.Usage.InputTokens
		t.usage.OutputTokens += res.Response.Usage.OutputTokens
		return results.Message{}, headUnstored()
	}
	t.conv = append(t.conv, reply)
	t.head, t.replyAt = res.Transcript, 0
	switch {
	case res.Transcript == "":
		// CallModel got the reply but could not store the conversation
		// (a full disk); rather than pay for the call again it returned
		// the reply, and the next call sends the conversation whole. Or
		// the conversation is short and not stored yet (Deferred).
		t.sent = 0
	case !res.Deferred:
		t.sent = len(t.conv)
	}
	if res.Deferred {
		t.replyAt = len(t.conv)
	}
	t.usage.InputTokens += res.Response.Usage.InputTokens
	t.usage.OutputTokens += res.Response.Usage.OutputTokens
	t.usage.CachedTokens += res.Response.Usage.CachedTokens
	t.addCost(res.Cost)
	if t.compacting() {
		if in.Full != "" {
			t.full = res.Full
		}
		t.justCompacted = false
		t.contextTokens = res.Response.Usage.InputTokens + res.Response.Usage.OutputTokens
		t.called(ctx, res.Response.Usage, res.Cost, false)
	}
	return reply, nil
}

// runs counts the runs of a turn that continued as new, zero for one that
// did not.
func (t *turn) runs() int {
	if len(t.runsBefore) == 0 {
		return 0
	}
	return len(t.runsBefore) + 1
}

// partial reports whether the turn holds only the end of its
// conversation, the rest being in the transcript store under its head: it
// cannot send the conversation whole when the store loses it.
func (t *turn) partial() bool {
	return t.in.Head != ""
}

// modelFailure is the turn's error text: the provider's classified error
// (CallModel keeps keys out of it) rather than the activity wrapper's
// event ids.
func modelFailure(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		err = appErr
	}
	return "the model call failed: " + err.Error()
}

func (t *turn) appendToolMessages(step []*call) error {
	for _, c := range step {
		m, err := results.Render(c.card)
		if err != nil {
			return fmt.Errorf("render call %s: %w", c.card.CallID, err)
		}
		t.conv = append(t.conv, m)
	}
	return nil
}

func (t *turn) find(id string) *call {
	return t.byID[id]
}

func (t *turn) cards() []results.Card {
	out := make([]results.Card, len(t.calls))
	for i, c := range t.calls {
		out[i] = c.card
	}
	return out
}

// currentStatus is the turn's status as callers see it: a running turn
// with a call that waits for a person is waiting.
func (t *turn) currentStatus() Status {
	if t.status == StatusRunning {
		for _, c := range t.calls {
			if c.card.State.Waiting() || (c.card.Agent != nil && len(c.card.Agent.Waiting) > 0) {
				return StatusWaiting
			}
		}
	}
	return t.status
}

func (t *turn) snapshot() State {
	cards, omitted := t.shownCards()
	return State{
		Status:            t.currentStatus(),
		Step:              t.step,
		Cards:             cards,
		Omitted:           omitted,
		Runs:              t.runs(),
		Budget:            t.budgetState(),
		Cost:              t.cost,
		UnpricedCalls:     t.unpriced,
		Usage:             t.stateUsage(),
		LastModelCall:     t.lastCall,
		Compactions:       t.compactions,
		SessionBudget:     t.stateSessionBudget(),
		Error:             t.failure,
		InvalidSignals:    t.invalidSignals,
		LastInvalidSignal: t.lastInvalidSignal,
	}
}
