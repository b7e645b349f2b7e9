package workflows

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/compact"
	"github.com/tollgate-dev/tollgate/results"
)

// Names other systems depend on. Changing one breaks every caller.
const (
	WorkflowName     = "AgentTurn"
	DefaultTaskQueue = "tollgate"
	// RespondName is both the Update (with a validator, returns the call's
	// new card) and the Signal (for systems that can only signal).
	RespondName = "respond"
	StateQuery  = "state"
	// ErrTypeInvalidInput is the failure type of a turn started with input
	// it cannot run.
	ErrTypeInvalidInput = "InvalidTurnInput"
)

// Defaults for omitted input.
const (
	DefaultMaxSteps        = 16
	DefaultResponseTimeout = 24 * time.Hour
)

// Input starts one turn.
type Input struct {
	Prompt string `json:"prompt"`
	// Messages is the conversation so far, oldest first.
	Messages []results.Message `json:"messages,omitempty"`
	Model    string            `json:"model"`
	System   string            `json:"system,omitempty"`
	Tools    []string          `json:"tools,omitempty"`
	Policy   Policy            `json:"policy,omitempty"`
	MaxSteps int               `json:"max_steps,omitempty"`
	// User owns the turn; tools look up account connections for them.
	User   string       `json:"user,omitempty"`
	Params model.Params `json:"params,omitempty"`
	// Head continues a stored conversation: the Result.Head of the turn
	// before. With it, Messages holds only the messages that follow the
	// stored part (the ones Result.Head does not cover), so the
	// conversation is never resent whole. A turn whose head is no longer
	// in the transcript store fails rather than go on without its history.
	Head string `json:"head,omitempty"`
	// Workspace continues in a workspace: the Result.Workspace of the turn
	// before, so the file and shell calls of a conversation run where its
	// earlier calls left their files. Sessions pass it on by themselves.
	// Only a workspace queue of this turn's own task queue counts; others,
	// and any value where workers share one workspace, are ignored.
	Workspace string `json:"workspace,omitempty"`
	// Continued is what the run before handed on, in a turn that continued
	// as new; callers leave it empty.
	Continued *Continued `json:"continued,omitempty"`
	// Agent names the worker's agent the turn runs (see docs/agents.md):
	// its instructions, model, tools and policy, which the fields above
	// narrow but never widen.
	Agent string `json:"agent,omitempty"`
	// Resolved is what the agents resolved to when the turn started, and
	// Caller is set on the turn of an agent another turn called; callers
	// leave both empty.
	Resolved *Resolved `json:"resolved,omitempty"`
	Caller   *Caller   `json:"caller,omitempty"`
	// SessionBudget is set by a session with a budget on each of its
	// turns: the turn stops for it as for policy.budget.
	SessionBudget *SessionBudget `json:"session_budget,omitempty"`
	// Metadata is the starter's own labels for the turn (a team, a
	// ticket, an environment), which approval rules read as
	// turn.metadata. Bounded by MaxMetadataKeys and its byte limits; the
	// turn of an agent a call runs gets its caller's.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// OnTimeout says what happens to a wait that outlives the response timeout.
type OnTimeout string

const OnTimeoutDeny OnTimeout = "deny"

// Policy is the turn's approval and waiting policy.
type Policy struct {
	// Approval maps a tool name (or "*" for every tool) to "always" or
	// "never". It can only raise a tool's default: "never" on a tool whose
	// worker default is "always" still asks.
	Approval        map[string]string `json:"approval,omitempty"`
	ResponseTimeout Duration          `json:"response_timeout,omitempty"`
	OnTimeout       OnTimeout         `json:"on_timeout,omitempty"`
	// MaxCallsPerStep bounds the tool calls one model reply may make
	// (default 64, at most 256); calls beyond it fail with a tool error
	// instead of running.
	MaxCallsPerStep int `json:"max_calls_per_step,omitempty"`
	// MaxHistoryEvents and MaxHistoryBytes end the turn cleanly before its
	// history reaches the server's limits (defaults 20,000 events and
	// 20 MiB, at most 40,000 and 40 MiB); lower them for a server
	// configured with lower limits than Temporal's defaults.
	MaxHistoryEvents int `json:"max_history_events,omitempty"`
	MaxHistoryBytes  int `json:"max_history_bytes,omitempty"`
	// WorkspaceTimeout bounds how long a call of a workspace tool waits
	// for the worker holding the turn's workspace to take it (default
	// 1m); past it the call fails with a tool error and later calls run
	// on another worker. It matters only where workers do not share one
	// workspace.
	WorkspaceTimeout Duration `json:"workspace_timeout,omitempty"`
	// Budget bounds what the turn uses; OnBudget says what happens when it
	// is reached: ask a person (the default) or stop.
	Budget   Budget   `json:"budget,omitempty"`
	OnBudget OnBudget `json:"on_budget,omitempty"`
	// ContextTokens is the model's context window in tokens (default: the
	// model family's, see docs/long-turns.md); Compaction says how the
	// conversation is shortened when it nears it: summarize (the
	// default), drop_oldest or off.
	ContextTokens int              `json:"context_tokens,omitempty"`
	Compaction    compact.Strategy `json:"compaction,omitempty"`
}

// Duration is a time.Duration written in JSON as a string ParseDuration
// reads ("90m", "24h", "7d"). It is written back as a Go duration
// ("168h0m0s"), the form recorded histories hold.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"90m\", \"24h\" or \"7d\": %w", err)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseDuration reads a Go duration ("90m", "1h30m", time.ParseDuration's
// grammar) or a whole number of days ("7d"), the unit people think of
// approvals in. The turn input and the starter's --timeout both read
// durations with it. A sign is allowed, as time.ParseDuration allows it;
// whoever needs a positive duration checks.
func ParseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days > maxDays || days < -maxDays {
			return 0, durationError(s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, durationError(s)
	}
	return d, nil
}

// maxDays is the most days a time.Duration holds (about 292 years).
const maxDays = int64(math.MaxInt64 / (24 * time.Hour))

func durationError(s string) error {
	return fmt.Errorf("%q is not a duration such as 90m, 24h or 7d", s)
}

// Response is the payload of the respond Update and Signal.
type Response struct {
	CallID   string               `json:"call_id"`
	Decision results.DecisionKind `json:"decision"`
	Reason   string               `json:"reason,omitempty"`
	// Arguments, with approve, replace the model's arguments.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Answer, with answer, is the chosen option id or the answer (JSON).
	Answer json.RawMessage `json:"answer,omitempty"`
	By     string          `json:"by,omitempty"`
	// Groups are the responder's groups, for a call an approval rule
	// left to a group's members. The workflow trusts them as it trusts
	// By: as whoever may send respond says (the gateway sets both from
	// the caller's API key; see docs/security.md).
	Groups []string `json:"groups,omitempty"`
	// Remember, with approve, remembers the approval as a grant: for
	// the rest of the session ("session") or for every turn of the
	// turn's user ("user"), so the same tool runs without asking;
	// RememberArgs limits it to the approved arguments. See
	// docs/approvals.md.
	Remember     string `json:"remember,omitempty"`
	RememberArgs bool   `json:"remember_args,omitempty"`
}

// Status is where the whole turn has got to.
type Status string

const (
	StatusRunning Status = "running"
	// StatusWaiting: at least one call waits for a person.
	StatusWaiting     Status = "waiting"
	StatusCompleted   Status = "completed"
	StatusFailed      Status = "failed"
	StatusCancelled   Status = "cancelled"
	StatusTransferred Status = "transferred"
	StatusMaxSteps    Status = "max_steps"
)

// Final reports whether the turn has ended.
func (s Status) Final() bool {
	return s != StatusRunning && s != StatusWaiting && s != ""
}

// State is what the state Query returns.
type State struct {
	Status Status `json:"status"`
	Step   int    `json:"step"`
	// Cards holds the calls of the turn so far, in call order: all of
	// them, or, past 100, every waiting call and the 100 most recent,
	// Omitted counting the others (the cards query pages through all).
	Cards   []results.Card `json:"cards"`
	Omitted *CardCounts    `json:"omitted,omitempty"`
	// Runs counts the runs of a turn that continued as new (zero when it
	// did not).
	Runs int `json:"runs,omitempty"`
	// Budget is set for a turn with policy.budget.
	Budget *BudgetState `json:"budget,omitempty"`
	// Cost is what the turn's priced model calls cost in US dollars;
	// UnpricedCalls counts the calls of models without a price.
	Cost          float64 `json:"cost,omitempty"`
	UnpricedCalls int     `json:"unpriced_calls,omitempty"`
	// Usage is the turn's tokens so far, over every model call (the
	// summarising calls of compactions included); LastModelCall is the
	// last call's. Compactions counts the times the turn compacted its
	// conversation.
	Usage         *model.Usage    `json:"usage,omitempty"`
	LastModelCall *ModelCallUsage `json:"last_model_call,omitempty"`
	Compactions   int             `json:"compactions,omitempty"`
	// SessionBudget is set for a turn of a session with a budget: the
	// session's budget and what the session had used at the turn's last
	// model call.
	SessionBudget *BudgetState `json:"session_budget,omitempty"`
	// Error says why a failed turn failed, as Result.Error does.
	Error string `json:"error,omitempty"`
	// InvalidSignals counts respond Signals that were dropped because they
	// did not validate; LastInvalidSignal says why the last one was.
	InvalidSignals    int    `json:"invalid_signals"`
	LastInvalidSignal string `json:"last_invalid_signal,omitempty"`
}

// Result is what a turn returns, whatever its status.
type Result struct {
	Status Status `json:"status"`
	// Text is the model's last text.
	Text string `json:"text"`
	// Messages are the messages this turn added (the prompt onward).
	Messages []results.Message `json:"messages"`
	// Cards and Omitted are as in State.
	Cards   []results.Card `json:"cards"`
	Omitted *CardCounts    `json:"omitted,omitempty"`
	// Transfer is set when the status is transferred.
	Transfer *results.Transfer `json:"transfer,omitempty"`
	// Error says why a failed turn failed.
	Error          string       `json:"error,omitempty"`
	Steps          int          `json:"steps"`
	Usage          model.Usage  `json:"usage"`
	Budget         *BudgetState `json:"budget,omitempty"`
	Cost           float64      `json:"cost,omitempty"`
	UnpricedCalls  int          `json:"unpriced_calls,omitempty"`
	InvalidSignals int          `json:"invalid_signals"`
	// Head names the stored conversation through the turn's last model
	// reply (Input.Head when the model never replied; empty when the
	// worker could not store it). What follows that reply is not stored:
	// the tool results of a turn that stopped mid-step, or, without a
	// reply, Input.Messages and the prompt. A turn that continues the
	// conversation gets Head and those messages.
	Head string `json:"head,omitempty"`
	// Workspace is the task queue of the worker that held the turn's
	// workspace when it ended (see "Workspace affinity" in docs/deployment.md);
	// empty where workers share one workspace. A turn that continues the
	// conversation gets it as Input.Workspace.
	Workspace string `json:"workspace,omitempty"`
	// FullHead names the whole stored conversation of a turn that
	// compacted (Compactions > 0): Head then names the compacted one the
	// model continues from. Empty when the turn did not compact, or could
	// not store the whole conversation.
	FullHead    string `json:"full_head,omitempty"`
	Compactions int    `json:"compactions,omitempty"`
	// ToolCalls counts the calls the model made in the turn.
	ToolCalls int `json:"tool_calls,omitempty"`
	// SessionBudget, for a turn of a session with a budget, is the
	// session's budget as the turn leaves it (people may have raised it)
	// and what the session used through the turn.
	SessionBudget *BudgetState `json:"session_budget,omitempty"`
}
