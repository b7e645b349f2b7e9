package tollgate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Client starts, answers and reads turns in the contract's terms, over a
// Temporal client that has the Plugin (or the same external storage).
type Client struct {
	Temporal client.Client
	// TaskQueue is where Start starts turns; empty means DefaultTaskQueue.
	TaskQueue string
	// EagerStart asks the server to hand a started turn's (or session's)
	// first workflow task straight back in the start response, skipping
	// a trip through matching. It takes effect only when a worker built
	// on this same Temporal client polls TaskQueue in this process (an
	// embedding program, the dev gateway of `worker --dev`) and has a
	// free slot; otherwise the start is an ordinary one.
	EagerStart bool
	// Live is where Events reads turns' live events (a *stream.NATS on
	// the workers' NATS); nil means Events is unavailable.
	Live stream.Source
}

// Events subscribes to the live events of turn turnID with ids after
// after (0: from the first event kept): text as the model writes it,
// tool calls, tool progress, card and status changes, and the result,
// which is the turn's last event. Read the subscription's Events channel
// until it closes; a *stream.LaggedError from Err says where to resume.
// Without a NATS the error wraps stream.ErrUnavailable: poll State then.
func (c Client) Events(ctx context.Context, turnID string, after uint64) (*stream.Subscription, error) {
	if c.Live == nil {
		return nil, fmt.Errorf("tollgate: %w: the client has no event source (Client.Live)", stream.ErrUnavailable)
	}
	return c.Live.Subscribe(ctx, stream.Filter{Turn: turnID}, after, 0)
}

// RejectedError is a response the turn refused: the validator's sentence
// (an unknown call, a wait that is over, an answer that does not fit) or a
// turn that has ended. Nothing changed; sending it again will not help.
type RejectedError struct {
	Reason string
	// Type says which kind of refusal: workflows.ErrTypeUnknownCall,
	// ErrTypeNotWaiting (a turn that has ended too) or
	// ErrTypeInvalidResponse.
	Type string
}

func (e *RejectedError) Error() string { return "rejected: " + e.Reason }

// StartOptions say how StartWithOptions starts a turn. The zero value is
// what Start does: Temporal's defaults for an id that is taken.
type StartOptions struct {
	// ID is the turn's workflow id; empty lets Temporal choose.
	ID string
	// IDReusePolicy says whether a closed turn's id may start another
	// turn; unspecified is Temporal's default, allow duplicate. A running
	// turn's id never does: the conflict policy is always fail, so no
	// start ends a turn that may be waiting for a person (the server
	// refuses terminate-if-running with it).
	IDReusePolicy enumspb.WorkflowIdReusePolicy
	// ErrorWhenAlreadyStarted makes a taken id (a turn runs under it, or
	// IDReusePolicy keeps it for the closed turn that had it) an error
	// that errors.As finds as *serviceerror.WorkflowExecutionAlreadyStarted.
	// Without it the SDK hands back the run that holds the id, as if this
	// start had made it.
	ErrorWhenAlreadyStarted bool
}

// Start starts a turn with the given workflow id (empty lets Temporal
// choose) and returns its run.
func (c Client) Start(ctx context.Context, id string, in workflows.Input) (client.WorkflowRun, error) {
	return c.StartWithOptions(ctx, StartOptions{ID: id}, in)
}

// StartWithOptions starts a turn as o says and returns its run.
func (c Client) StartWithOptions(ctx context.Context, o StartOptions, in workflows.Input) (client.WorkflowRun, error) {
	summary, details := workflows.StartSummary(in)
	run, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       o.ID,
		TaskQueue:                                c.taskQueue(),
		StaticSummary:                            summary,
		StaticDetails:                            details,
		EnableEagerStart:                         c.EagerStart,
		WorkflowIDReusePolicy:                    o.IDReusePolicy,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: o.ErrorWhenAlreadyStarted,
	}, workflows.WorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("start turn %s: %w", o.ID, err)
	}
	return run, nil
}

func (c Client) taskQueue() string {
	if c.TaskQueue == "" {
		return DefaultTaskQueue
	}
	return c.TaskQueue
}

// StateOptions name the run StateWithOptions reads.
type StateOptions struct {
	TurnID string
	// RunID pins one run of the turn; empty is its latest run. A caller
	// that checked a run (whose user it is, what a link was made for)
	// pins it, so a turn that takes the id meanwhile is not the one read.
	RunID string
}

// State runs the state Query on the turn's latest run.
func (c Client) State(ctx context.Context, turnID string) (workflows.State, error) {
	return c.StateWithOptions(ctx, StateOptions{TurnID: turnID})
}

// StateWithOptions runs the state Query on the run o names.
func (c Client) StateWithOptions(ctx context.Context, o StateOptions) (workflows.State, error) {
	v, err := c.Temporal.QueryWorkflow(ctx, o.TurnID, o.RunID, workflows.StateQuery)
	if err != nil {
		return workflows.State{}, fmt.Errorf("query the state of turn %s: %w", o.TurnID, err)
	}
	var s workflows.State
	if err := v.Get(&s); err != nil {
		return workflows.State{}, fmt.Errorf("decode the state of turn %s: %w", o.TurnID, err)
	}
	return s, nil
}

// CardsOptions page through every card of a turn, in call order.
type CardsOptions struct {
	TurnID string
	// Offset is the index of the first call wanted, counted from 0 across
	// the turn; Limit bounds the page (zero: as many as one answer holds,
	// 500).
	Offset, Limit int
}

// Cards returns a page of the turn's cards. A turn that continued as new
// keeps each card in the run where its call ended, so a page before the
// latest run's calls is read from the earlier run that holds it (runs
// stay readable as long as the namespace retains them).
func (c Client) Cards(ctx context.Context, o CardsOptions) (workflows.Cards, error) {
	page, err := c.cardsOfRun(ctx, o.TurnID, "", workflows.CardsPage{Offset: o.Offset, Limit: o.Limit})
	if err != nil || o.Offset >= page.First {
		return page, err
	}
	for _, r := range page.Runs {
		if o.Offset < r.First || o.Offset >= r.First+r.Count {
			continue
		}
		earlier, err := c.cardsOfRun(ctx, o.TurnID, r.RunID, workflows.CardsPage{Offset: o.Offset, Limit: o.Limit})
		if err != nil {
			return workflows.Cards{}, err
		}
		earlier.Total, earlier.Runs = page.Total, page.Runs
		return earlier, nil
	}
	return workflows.Cards{Cards: []results.Card{}, Offset: o.Offset, First: page.First, Total: page.Total, Runs: page.Runs}, nil
}

func (c Client) cardsOfRun(ctx context.Context, turnID, runID string, p workflows.CardsPage) (workflows.Cards, error) {
	v, err := c.Temporal.QueryWorkflow(ctx, turnID, runID, workflows.CardsQuery, p)
	if err != nil {
		return workflows.Cards{}, fmt.Errorf("query the cards of turn %s: %w", turnID, err)
	}
	var out workflows.Cards
	if err := v.Get(&out); err != nil {
		return workflows.Cards{}, fmt.Errorf("decode the cards of turn %s: %w", turnID, err)
	}
	return out, nil
}

// RespondOptions name the run RespondWithOptions answers and the Update
// it sends.
type RespondOptions struct {
	TurnID string
	// RunID pins one run of the turn; empty is its latest run. A pinned
	// run that has ended is refused as a turn that has ended, and the
	// response is not applied to a run that took the id after it.
	RunID string
	// UpdateID is the respond Update's id: the server applies one Update
	// per id, and a second send under it gets the first one's outcome.
	// Empty is ResponseID(r), so only the same response deduplicates; a
	// caller with its own idempotency key (an HTTP Idempotency-Key, a
	// signed link) passes an id made from that.
	UpdateID string
}

// Respond sends the respond Update to the turn's latest run and returns
// the call's new card. The Update id is derived from the response, so
// sending the same response again (after a timeout while no worker ran,
// say) attaches to the first instead of applying twice. A refusal is a
// *RejectedError.
func (c Client) Respond(ctx context.Context, turnID string, r workflows.Response) (results.Card, error) {
	return c.RespondWithOptions(ctx, RespondOptions{TurnID: turnID}, r)
}

// RespondWithOptions is Respond to the run and under the Update id o
// names.
//
// A call id "<call>/<child call>", as a calling card's agent.waiting
// shows it, is answered in the turn of the agent that call runs, with the
// same Update semantics: that turn validates and acknowledges it.
func (c Client) RespondWithOptions(ctx context.Context, o RespondOptions, r workflows.Response) (results.Card, error) {
	if child, routed := workflows.RouteResponse(o.TurnID, r); child != o.TurnID {
		// The child's own run: o.RunID pins the calling turn's.
		o.TurnID, o.RunID, r = child, "", routed
	}
	updateID := o.UpdateID
	if updateID == "" {
		updateID = ResponseID(r)
	}
	h, err := c.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     updateID,
		WorkflowID:   o.TurnID,
		RunID:        o.RunID,
		UpdateName:   workflows.RespondName,
		Args:         []any{r},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var card results.Card
	if err == nil {
		err = h.Get(ctx, &card)
	}
	if err != nil {
		if rej, ok := AsRejection(err, o.TurnID); ok {
			return results.Card{}, rej
		}
		return results.Card{}, fmt.Errorf("respond to turn %s: %w", o.TurnID, err)
	}
	return card, nil
}

// SignalOptions name the run SignalWithOptions signals.
type SignalOptions struct {
	TurnID string
	// RunID pins one run of the turn; empty is its latest run. A pinned
	// run that has ended is a *serviceerror.NotFound.
	RunID string
}

// Signal sends the respond Signal to the turn's latest run, for callers
// that must not wait for a worker. Nothing validates it on the way in; a
// bad one is counted in the state's invalid_signals.
func (c Client) Signal(ctx context.Context, turnID string, r workflows.Response) error {
	return c.SignalWithOptions(ctx, SignalOptions{TurnID: turnID}, r)
}

// SignalWithOptions is Signal to the run o names.
func (c Client) SignalWithOptions(ctx context.Context, o SignalOptions, r workflows.Response) error {
	if child, routed := workflows.RouteResponse(o.TurnID, r); child != o.TurnID {
		o.TurnID, o.RunID, r = child, "", routed
	}
	if err := c.Temporal.SignalWorkflow(ctx, o.TurnID, o.RunID, workflows.RespondName, r); err != nil {
		return fmt.Errorf("signal turn %s: %w", o.TurnID, err)
	}
	return nil
}

// Result waits for the turn to end and returns what it returned.
func (c Client) Result(ctx context.Context, turnID string) (workflows.Result, error) {
	var res workflows.Result
	if err := c.Temporal.GetWorkflow(ctx, turnID, "").Get(ctx, &res); err != nil {
		return res, fmt.Errorf("wait for turn %s: %w", turnID, err)
	}
	return res, nil
}

// ResponseID names a response by its content: the Update id Respond uses.
func ResponseID(r workflows.Response) string {
	b, _ := json.Marshal(r)
	sum := sha256.Sum256(b)
	return fmt.Sprintf("respond-%s-%s-%s", r.CallID, r.Decision, hex.EncodeToString(sum[:6]))
}

// AsRejection reports whether a respond Update's error is a refusal: the
// validator's (or handler's) sentence, or a turn that has ended. Anything
// else (no worker, no server) may succeed when sent again.
func AsRejection(err error, turnID string) (*RejectedError, bool) {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return &RejectedError{Reason: app.Message(), Type: rejectionType(app.Type())}, true
	}
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) && strings.Contains(nf.Error(), "already completed") {
		return &RejectedError{Reason: fmt.Sprintf("the turn %s has ended; it takes no more responses", turnID), Type: workflows.ErrTypeNotWaiting}, true
	}
	return nil, false
}

// rejectionType maps the failure type of a refused Update to its kind.
// Workers from before the kinds existed reject with their error's Go type
// name; those refusals were about the response, so they count as invalid.
func rejectionType(t string) string {
	switch t {
	case workflows.ErrTypeUnknownCall, workflows.ErrTypeNotWaiting, workflows.ErrTypeInvalidResponse:
		return t
	}
	return workflows.ErrTypeInvalidResponse
}

// Agents lists the named agents the workers of the client's task queue
// offer, by asking one of them (the ListAgents workflow): what a worker
// was started with, not a registry's idea of it. With no worker polling
// the queue it waits until ctx ends.
func (c Client) Agents(ctx context.Context) ([]workflows.AgentInfo, error) {
	run, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		TaskQueue: c.taskQueue(),
		// Gone on its own if no worker ever takes it.
		WorkflowExecutionTimeout: time.Minute,
		StaticSummary:            "list the worker's agents",
	}, workflows.ListAgentsName)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	var out []workflows.AgentInfo
	if err := run.Get(ctx, &out); err != nil {
		return nil, fmt.Errorf("list agents on task queue %s: %w", c.taskQueue(), err)
	}
	return out, nil
}

// ContinueOptions say how ContinueWithAgent starts the next turn.
type ContinueOptions struct {
	// ID is the new turn's workflow id; empty lets Temporal choose.
	ID string
	// Prompt, when set, is a new message after the handoff; without it
	// the agent answers the conversation as it stands.
	Prompt string
	// User owns the new turn, as the transferred turn's user did.
	User string
}

// ErrNotTransferred is ContinueWithAgent's error for a turn that did not
// end transferred.
var ErrNotTransferred = errors.New("the turn did not end with a transfer")

// ContinueWithAgent continues a turn that ended transferred with the
// agent its transfer names, in one call: it waits for the turn's result
// and starts a turn of that agent on the conversation as it stands (the
// result's head and the tool results after it), which the model sees end
// with the handoff's confirmation.
func (c Client) ContinueWithAgent(ctx context.Context, turnID string, o ContinueOptions) (client.WorkflowRun, error) {
	res, err := c.Result(ctx, turnID)
	if err != nil {
		return nil, err
	}
	if res.Status != workflows.StatusTransferred || res.Transfer == nil {
		return nil, fmt.Errorf("continue turn %s: %w (it ended %s)", turnID, ErrNotTransferred, res.Status)
	}
	in, err := workflows.Handoff(res)
	if err != nil {
		return nil, fmt.Errorf("continue turn %s: %w", turnID, err)
	}
	in.Prompt, in.User = o.Prompt, o.User
	return c.StartWithOptions(ctx, StartOptions{ID: o.ID, IDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE, ErrorWhenAlreadyStarted: true}, in)
}

// Reevaluate asks the turn's latest run to decide its calls waiting for
// approval again, under the approval rules of the worker that runs it now
// (the reevaluate Update, docs/approvals.md): a call now allowed runs, a
// call now denied is refused with the rule's reason, and one that still
// needs approval keeps waiting under the new rule. by names the operator.
// A refusal (the turn has ended, it does not use rules, it started before
// re-evaluation existed) is a *RejectedError.
func (c Client) Reevaluate(ctx context.Context, turnID, by string) (workflows.Reevaluation, error) {
	h, err := c.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   turnID,
		UpdateName:   workflows.ReevaluateName,
		Args:         []any{workflows.ReevaluateRequest{By: by}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var out workflows.Reevaluation
	if err == nil {
		err = h.Get(ctx, &out)
	}
	if err != nil {
		if strings.Contains(err.Error(), "unknown update") {
			// The SDK's answer to an Update the run registered no handler for.
			return workflows.Reevaluation{}, &RejectedError{Reason: fmt.Sprintf("turn %s started before re-evaluation existed (or on an older worker); its waiting calls keep the decisions they got", turnID), Type: workflows.ErrTypeNotWaiting}
		}
		if rej, ok := AsRejection(err, turnID); ok {
			return workflows.Reevaluation{}, rej
		}
		return workflows.Reevaluation{}, fmt.Errorf("re-evaluate turn %s: %w", turnID, err)
	}
	return out, nil
}
