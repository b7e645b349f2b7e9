package results

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// State is where one tool call has got to: the card a UI draws.
type State string

const (
	StatePendingApproval   State = "pending_approval"
	StateWaitingAnswer     State = "waiting_answer"
	StateWaitingConnection State = "waiting_connection"
	StateRunning           State = "running"
	StateSucceeded         State = "succeeded"
	StateFailed            State = "failed"
	StateRefused           State = "refused"
)

// states lists every card state in a stable order.
var states = []State{StatePendingApproval, StateWaitingAnswer, StateWaitingConnection, StateRunning, StateSucceeded, StateFailed, StateRefused}

// Final reports whether a call in state s will not change again.
func (s State) Final() bool {
	return s == StateSucceeded || s == StateFailed || s == StateRefused
}

// Waiting reports whether a call in state s waits for a person.
func (s State) Waiting() bool {
	return s == StatePendingApproval || s == StateWaitingAnswer || s == StateWaitingConnection
}

// FailureReason says why a call failed.
type FailureReason string

const (
	// FailureToolError is an error the tool reported for the model.
	FailureToolError FailureReason = "tool_error"
	// FailureInternal is a system failure; Detail stays with operators.
	FailureInternal FailureReason = "internal_error"
	// FailureOutcomeUnknown is a non-idempotent tool whose worker was lost
	// while it ran: it may or may not have had its effect.
	FailureOutcomeUnknown FailureReason = "outcome_unknown"
)

// OutcomeUnknownMessage is what the model and the person are told when a
// non-idempotent tool's worker was lost mid-run.
const OutcomeUnknownMessage = "outcome unknown: the worker stopped while this tool ran; it was not retried because it is not idempotent"

// Failure is why a call ended failed.
type Failure struct {
	Reason FailureReason `json:"reason"`
	// Message is model-visible for tool_error and outcome_unknown. For
	// internal_error it is empty and Ref/Detail carry the facts.
	Message string `json:"message,omitempty"`
	Ref     string `json:"ref,omitempty"`
	// Detail is operator-only and never rendered for the model.
	Detail string `json:"detail,omitempty"`
}

// DecisionKind is what a person (or the host) decided about a waiting call.
type DecisionKind string

const (
	DecisionApprove   DecisionKind = "approve"
	DecisionDeny      DecisionKind = "deny"
	DecisionAnswer    DecisionKind = "answer"
	DecisionConnected DecisionKind = "connected"
	DecisionCancel    DecisionKind = "cancel"
	// DecisionTimeout is recorded by the host when a wait outlived its
	// response timeout.
	DecisionTimeout DecisionKind = "timeout"
)

// Decision is one recorded answer to a wait: who, when (workflow time),
// what and why.
type Decision struct {
	Decision  DecisionKind    `json:"decision"`
	By        string          `json:"by,omitempty"`
	At        time.Time       `json:"at"`
	Reason    string          `json:"reason,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Answer    json.RawMessage `json:"answer,omitempty"`
	// Remember is an approve's remember (session or user), RememberArgs
	// its remember_args; Grant is the id of the grant stored from it, or
	// GrantError says why none was (the approval holds either way).
	Remember     string `json:"remember,omitempty"`
	RememberArgs bool   `json:"remember_args,omitempty"`
	Grant        string `json:"grant,omitempty"`
	GrantError   string `json:"grant_error,omitempty"`
}

// Card is one tool call's current state. Which fields are set depends on
// State; Validate enforces it.
type Card struct {
	CallID string `json:"call_id"`
	// ModelCallID is the model's own id for the call, set when CallID is
	// not that id (the host keeps call ids unique across a turn and
	// replaces ids people cannot type). The tool message answers the
	// model's id, since providers match results to calls by it; empty
	// means CallID is the model's id.
	ModelCallID string `json:"model_call_id,omitempty"`
	Tool        string `json:"tool"`
	// Arguments are what the model asked for.
	Arguments json.RawMessage `json:"arguments"`
	// EditedArguments, when set, are what a person approved instead; the
	// tool ran with them and the model is told.
	EditedArguments json.RawMessage `json:"edited_arguments,omitempty"`
	State           State           `json:"state"`
	// Queued marks a running call that waits for an earlier call of its
	// step to finish, because the tool does not run concurrently.
	Queued bool `json:"queued,omitempty"`

	// Interrupt is the tool's question in waiting_answer, or the plan to
	// approve in pending_approval when the tool itself asked for approval.
	Interrupt *Interrupt `json:"interrupt,omitempty"`
	// Connection is what waiting_connection waits for.
	Connection *ConnectionRequired `json:"connection,omitempty"`
	// Output is a succeeded call's result; nil means it succeeded silently.
	Output *Success `json:"output,omitempty"`
	// Transfer is set on a succeeded handoff.
	Transfer *Transfer `json:"transfer,omitempty"`
	// Failure is set exactly when State is failed.
	Failure *Failure `json:"failure,omitempty"`
	// Reason is set exactly when State is refused.
	Reason string `json:"reason,omitempty"`

	Decisions []Decision `json:"decisions,omitempty"`

	// Preview is what the call would change, for the person deciding on
	// it: set while the call waits for approval when its tool can preview
	// (tool.Spec.Previews), and kept after the decision so that a reviewer
	// sees what was approved. It is a snapshot of the workspace when the
	// call started waiting, for the arguments the model sent (not edited
	// ones), bounded by MaxPreviewBytes (BoundPreview). Never shown to the
	// model.
	Preview []FileDiff `json:"preview,omitempty"`
	// PreviewNote is one sentence about the preview when there is one to
	// say: that the call as it stands would fail and the tool's reason,
	// that it would change nothing, or why no preview could be made. At
	// most MaxPreviewNote bytes.
	PreviewNote string `json:"preview_note,omitempty"`

	// Approval is set when one of the worker's approval rules decided the
	// call (docs/approvals.md): which rule, and for a call that needs
	// approval who may give it and how far it has got.
	Approval *Approval `json:"approval,omitempty"`
	// Agent is set on a call of another agent (an agent offered as a
	// tool): which agent runs it, in which turn, and what waits there.
	Agent *AgentCall `json:"agent,omitempty"`
}

// AgentCall is the turn another agent runs for one call.
type AgentCall struct {
	// Name is the agent the call runs; Turn is the workflow id of its
	// turn, the calling turn's id and the call id joined by "/".
	Name string `json:"name"`
	Turn string `json:"turn"`
	// Chain names the agents from the top turn's down to this one.
	Chain []string `json:"chain,omitempty"`
	// Waiting are the calls that wait for people in that turn (and in the
	// turns it calls in turn), their call ids prefixed with this call's id
	// and "/": a respond to the calling turn under such an id reaches the
	// turn that waits.
	Waiting []Card `json:"waiting,omitempty"`
}

// Approval is what an approval rule made of a call.
type Approval struct {
	// Rule names the rule that decided; Action is what it decided
	// (allow, require_approval or deny), after the turn's policy, which
	// may only make it stricter.
	Rule   string `json:"rule,omitempty"`
	Action string `json:"action"`
	// Message says why: the rule's reason, or what made the call ask.
	Message string `json:"message,omitempty"`
	// Group, when set, is the group whose members may answer; once the
	// wait has escalated, members of EscalateGroup may answer too.
	Group string `json:"group,omitempty"`
	// Quorum is how many distinct people must approve; Approvals lists
	// those who have so far, in order.
	Quorum    int      `json:"quorum,omitempty"`
	Approvals []string `json:"approvals,omitempty"`
	// SeparateDuties bars the turn's user from approving.
	SeparateDuties bool `json:"separate_duties,omitempty"`
	// EscalateAfter (a Go duration) is how long the wait lasts before it
	// escalates; EscalatesAt is when it does (set when the wait begins),
	// and Escalated says it has.
	EscalateAfter string     `json:"escalate_after,omitempty"`
	EscalateGroup string     `json:"escalate_group,omitempty"`
	EscalatesAt   *time.Time `json:"escalates_at,omitempty"`
	Escalated     bool       `json:"escalated,omitempty"`
	// Grant is the remembered approval that let the call run without
	// asking (Action is then allow).
	Grant *GrantUse `json:"grant,omitempty"`
}

// GrantUse names the remembered approval (package grants) a call ran
// under: its id, for session or user, who approved the call it was made
// from and when, whether it holds only for the arguments approved then,
// and for a session grant its session.
type GrantUse struct {
	ID      string    `json:"id"`
	Scope   string    `json:"scope"`
	By      string    `json:"by,omitempty"`
	At      time.Time `json:"at"`
	Args    bool      `json:"args,omitempty"`
	Session string    `json:"session,omitempty"`
}

// progress is a pending approval's rule, group and quorum for a summary
// line: " [rule refunds, group leads, 1 of 2 approvals: ann]".
func (a *Approval) progress() string {
	if a == nil || a.Action != ApprovalRequireApproval {
		return ""
	}
	var parts []string
	if a.Rule != "" {
		parts = append(parts, "rule "+oneLine(a.Rule, 80))
	}
	if a.Group != "" {
		g := "group " + a.Group
		if a.Escalated && a.EscalateGroup != "" {
			g += " or " + a.EscalateGroup + " (escalated)"
		}
		parts = append(parts, g)
	}
	if a.Quorum > 1 {
		p := fmt.Sprintf("%d of %d approvals", len(a.Approvals), a.Quorum)
		if len(a.Approvals) > 0 {
			p += ": " + oneLine(strings.Join(a.Approvals, ", "), 120)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return ""
	}
	return " [" + strings.Join(parts, ", ") + "]"
}

// Approval actions.
const (
	ApprovalAllow           = "allow"
	ApprovalRequireApproval = "require_approval"
	ApprovalDeny            = "deny"
)

// EffectiveArguments are the arguments the tool runs with.
func (c Card) EffectiveArguments() json.RawMessage {
	if len(c.EditedArguments) > 0 {
		return c.EditedArguments
	}
	return c.Arguments
}

// Validate reports whether c holds only what makes sense in its state.
func (c Card) Validate() error {
	if c.CallID == "" {
		return fmt.Errorf("card has no call_id")
	}
	if c.Tool == "" {
		return fmt.Errorf("card %s has no tool", c.CallID)
	}
	bad := func(field string) error {
		return fmt.Errorf("card %s in state %s must not carry %s", c.CallID, c.State, field)
	}
	has := map[string]bool{
		"interrupt":  c.Interrupt != nil,
		"connection": c.Connection != nil,
		"output":     c.Output != nil,
		"transfer":   c.Transfer != nil,
		"failure":    c.Failure != nil,
		"reason":     c.Reason != "",
		"queued":     c.Queued,
	}
	allowed := map[State][]string{
		StatePendingApproval:   {"interrupt"},
		StateWaitingAnswer:     {"interrupt"},
		StateWaitingConnection: {"connection"},
		StateRunning:           {"queued"},
		StateSucceeded:         {"output", "transfer"},
		StateFailed:            {"failure"},
		StateRefused:           {"reason"},
	}
	ok, known := allowed[c.State]
	if !known {
		if c.State == "" {
			return fmt.Errorf("card %s has no state", c.CallID)
		}
		return fmt.Errorf("card %s has unknown state %q", c.CallID, c.State)
	}
	for _, field := range []string{"interrupt", "connection", "output", "transfer", "failure", "reason", "queued"} {
		if has[field] && !slices.Contains(ok, field) {
			return bad(field)
		}
	}
	switch c.State {
	case StatePendingApproval:
		// A tool that asks for approval itself interrupts with a plan; any
		// other interrupt is a question and belongs in waiting_answer.
		if c.Interrupt != nil && c.Interrupt.Type != InterruptApproval {
			return fmt.Errorf("card %s is pending approval but its interrupt is a %s", c.CallID, c.Interrupt.Type)
		}
	case StateWaitingAnswer:
		if c.Interrupt == nil {
			return fmt.Errorf("card %s waits for an answer but has no interrupt", c.CallID)
		}
		if c.Interrupt.Type == InterruptApproval {
			return fmt.Errorf("card %s waits for an answer but its interrupt is an approval", c.CallID)
		}
	case StateWaitingConnection:
		if c.Connection == nil {
			return fmt.Errorf("card %s waits for a connection but names none", c.CallID)
		}
		if c.Connection.Provider == "" {
			return fmt.Errorf("card %s waits for a connection that names no provider", c.CallID)
		}
	case StateFailed:
		if c.Failure == nil {
			return fmt.Errorf("card %s failed without a failure", c.CallID)
		}
		if err := c.Failure.validate(); err != nil {
			return fmt.Errorf("card %s: %w", c.CallID, err)
		}
	case StateRefused:
		if c.Reason == "" {
			return fmt.Errorf("card %s was refused without a reason", c.CallID)
		}
	case StateSucceeded:
		if c.Output != nil && c.Transfer != nil {
			return fmt.Errorf("card %s carries both output and transfer", c.CallID)
		}
		if c.Output != nil {
			if err := c.Output.validate(); err != nil {
				return fmt.Errorf("card %s output: %w", c.CallID, err)
			}
		}
		if c.Transfer != nil && c.Transfer.Target == "" {
			return fmt.Errorf("card %s transfers to no target", c.CallID)
		}
	}
	if c.Interrupt != nil {
		if err := c.Interrupt.Validate(); err != nil {
			return fmt.Errorf("card %s: %w", c.CallID, err)
		}
	}
	for i, d := range c.Decisions {
		if !slices.Contains(decisionKinds, string(d.Decision)) {
			return fmt.Errorf("card %s decision %d: unknown decision %q", c.CallID, i, d.Decision)
		}
	}
	if a := c.Approval; a != nil {
		switch a.Action {
		case ApprovalAllow, ApprovalRequireApproval, ApprovalDeny:
		default:
			return fmt.Errorf("card %s: approval action %q is not allow, require_approval or deny", c.CallID, a.Action)
		}
	}
	// A preview is allowed in every state: it is made when the call
	// starts waiting and stays through whatever follows.
	return c.validatePreview()
}

var decisionKinds = []string{
	string(DecisionApprove), string(DecisionDeny), string(DecisionAnswer),
	string(DecisionConnected), string(DecisionCancel), string(DecisionTimeout),
}

// validate holds a failure to what Render needs: a known reason, a message
// the model can read, or a reference an operator can look up.
func (f Failure) validate() error {
	switch f.Reason {
	case FailureToolError:
		if f.Message == "" {
			return fmt.Errorf("tool_error failure has an empty message")
		}
	case FailureInternal:
		if f.Ref == "" {
			return fmt.Errorf("internal_error failure has no reference id")
		}
	case FailureOutcomeUnknown:
		// Message may be empty: OutcomeUnknownMessage stands in for it.
	case "":
		return fmt.Errorf("failure has no reason")
	default:
		return fmt.Errorf("unknown failure reason %q", f.Reason)
	}
	return nil
}

// modelMessage is what the model and the person are told about f. For an
// internal error it is the generic sentence, never Message or Detail.
func (f Failure) modelMessage() string {
	switch f.Reason {
	case FailureInternal:
		return InternalErrorText(f.Ref)
	case FailureOutcomeUnknown:
		if f.Message == "" {
			return OutcomeUnknownMessage
		}
	}
	return f.Message
}

// Summary is a one-line description of the card for the CLI and logs. It
// never includes internal error detail. It accepts any card, valid or not,
// because it is what a log line prints when something has gone wrong; tool
// names and other model-supplied text are flattened onto one line.
func (c Card) Summary() string {
	return c.summary() + c.Approval.grantNote()
}

// grantNote names the grant a call ran under for a summary line:
// " [grant g-1a2b, user, approved by ann]".
func (a *Approval) grantNote() string {
	if a == nil || a.Grant == nil {
		return ""
	}
	g := a.Grant
	note := " [grant " + oneLine(g.ID, 40) + ", " + oneLine(g.Scope, 20)
	if g.Args {
		note += ", these arguments"
	}
	if g.By != "" {
		note += ", approved by " + oneLine(g.By, 80)
	}
	return note + "]"
}

func (c Card) summary() string {
	head := oneLine(c.CallID+" "+c.Tool, 200)
	switch c.State {
	case StatePendingApproval:
		if c.Interrupt != nil && c.Interrupt.Plan != "" {
			return fmt.Sprintf("%s: pending approval: %s", head, oneLine(c.Interrupt.Plan, 80))
		}
		if args := oneLine(string(c.EffectiveArguments()), 80); args != "" {
			return fmt.Sprintf("%s: pending approval %s%s", head, args, c.Approval.progress())
		}
		return head + ": pending approval" + c.Approval.progress()
	case StateWaitingAnswer:
		if c.Interrupt == nil {
			return head + ": waiting for an answer"
		}
		return fmt.Sprintf("%s: waiting for an answer: %s", head, oneLine(c.Interrupt.Prompt, 80))
	case StateWaitingConnection:
		if c.Connection == nil {
			return head + ": waiting for a connection"
		}
		return fmt.Sprintf("%s: waiting for a %s connection", head, oneLine(c.Connection.Provider, 80))
	case StateRunning:
		return head + ": running"
	case StateSucceeded:
		if c.Transfer != nil {
			return fmt.Sprintf("%s: transferred to %s", head, oneLine(c.Transfer.Target, 80))
		}
		if c.Output == nil || len(c.Output.Parts) == 0 {
			return head + ": succeeded silently"
		}
		return fmt.Sprintf("%s: succeeded: %s", head, oneLine(firstText(c.Output.Parts), 80))
	case StateFailed:
		if c.Failure == nil {
			return head + ": failed"
		}
		if c.Failure.Reason == FailureInternal {
			return fmt.Sprintf("%s: failed: internal error (ref %s)", head, oneLine(c.Failure.Ref, 80))
		}
		return fmt.Sprintf("%s: failed: %s", head, oneLine(c.Failure.modelMessage(), 80))
	case StateRefused:
		return fmt.Sprintf("%s: refused: %s", head, oneLine(c.Reason, 80))
	}
	return fmt.Sprintf("%s: %s", head, oneLine(string(c.State), 80))
}

func firstText(parts []Part) string {
	for _, p := range parts {
		switch p.Type {
		case PartText:
			return p.Text
		case PartJSON:
			return string(p.JSON)
		case PartMedia:
			return mediaPlaceholder(p.MediaType)
		}
	}
	return ""
}
