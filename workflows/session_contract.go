package workflows

import (
	"time"

	"github.com/tollgate-dev/tollgate/results"
)

// Names of the session contract. Changing one breaks every caller.
const (
	// SessionWorkflowName is one conversation: each message a person sends
	// becomes a child AgentTurn with id <session id>/turn-<n>.
	SessionWorkflowName = "AgentSession"
	// SendName is both the Update (validated; returns the turn's id) and
	// the Signal (for systems that can only signal) that add a message.
	SendName = "send"
	// EndName is the Update that closes the session.
	EndName = "end"
	// ConversationQuery returns the Conversation.
	ConversationQuery = "conversation"
	// ErrTypeSessionClosed is the failure type of a send or end the
	// session refuses because it has ended.
	ErrTypeSessionClosed = "SessionClosed"
	// ErrTypeInvalidMessage is the failure type of a send the session
	// refuses because of the message (empty, too long) or a full queue.
	ErrTypeInvalidMessage = "InvalidMessage"
)

// Session bounds. The session's state is carried from run to run by
// continue-as-new and returned whole by the conversation Query, so all of
// it is bounded, however long the conversation lasts.
const (
	// DefaultTurnsPerRun is how many turns a session runs before it
	// continues as new, unless Temporal suggests it sooner.
	DefaultTurnsPerRun = 100
	// MaxTurnsPerRun keeps one run's history far below the server's
	// limits (each turn adds about a dozen events to the session).
	MaxTurnsPerRun = 1000
	// MaxMessageBytes bounds the text of one message.
	MaxMessageBytes = 32 << 10
	// MaxPending bounds the messages waiting for their turn.
	MaxPending = 16
	// RecentTurns is how many turns the conversation keeps in detail;
	// earlier ones are counted by status.
	RecentTurns = 20
	// excerptBytes bounds the user text and reply a turn record keeps;
	// the whole reply is in the turn's own result.
	excerptBytes = 4 << 10
)

// SessionInput starts a session.
type SessionInput struct {
	// Turn is what every turn runs with: model, system, tools, policy,
	// max_steps, user, params. Its prompt must be empty: messages come
	// through send. Head and Messages, if set, are a conversation to go
	// on with (a turn's Result.Head and the messages it does not cover).
	Turn Input `json:"turn"`
	// TurnsPerRun is how many turns a run takes before the session
	// continues as new (default 100, at most 1000); it continues sooner
	// when Temporal suggests it.
	TurnsPerRun int `json:"turns_per_run,omitempty"`
	// Budget bounds what all the session's turns use together (the shape
	// of policy.budget; wall time counts from the session's start). A
	// turn that reaches it waits for a person as for its own budget, and
	// approving raises the session's budget.
	Budget Budget `json:"budget,omitempty"`
	// Carried is what the previous run handed on when it continued as
	// new. Callers leave it empty.
	Carried *Carried `json:"carried,omitempty"`
}

// Carried is a session's state across continue-as-new, apart from the
// conversation itself, which travels as Turn.Head and Turn.Messages.
type Carried struct {
	// Next is the number the next message's turn gets.
	Next              int          `json:"next"`
	Recent            []TurnRecord `json:"recent,omitempty"`
	Earlier           TurnCounts   `json:"earlier"`
	Pending           []Queued     `json:"pending,omitempty"`
	Runs              int          `json:"runs"`
	InvalidSignals    int          `json:"invalid_signals,omitempty"`
	LastInvalidSignal string       `json:"last_invalid_signal,omitempty"`
	// Sends are the Update ids of the last sends and the turns they got,
	// oldest first, so a send retried in a later run is the same message.
	Sends []SentUpdate `json:"sends,omitempty"`
	// Budget is the session's budget as people raised it; Spent what its
	// turns used; StartedAt when its first run began.
	Budget    Budget     `json:"budget,omitempty"`
	Spent     *Spent     `json:"spent,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	// Agent holds the conversation now; Holders are the last handoffs.
	Agent   string      `json:"agent,omitempty"`
	Holders []AgentHold `json:"holders,omitempty"`
}

// AgentHold is one stretch of a session's conversation held by one agent.
type AgentHold struct {
	Agent string    `json:"agent"`
	Since time.Time `json:"since"`
	// From is the agent that handed the conversation over, in turn Turn,
	// with Message; Now says the agent took over at once rather than from
	// the next message. All empty for the agent the session started with.
	From    string `json:"from,omitempty"`
	Turn    string `json:"turn,omitempty"`
	Message string `json:"message,omitempty"`
	Now     bool   `json:"now,omitempty"`
}

// SentUpdate is one send Update the session took.
type SentUpdate struct {
	UpdateID string `json:"update_id"`
	TurnID   string `json:"turn_id"`
}

// Send is the payload of the send Update and Signal.
type Send struct {
	// Text is the person's message: not blank, at most 32 KiB.
	Text string `json:"text"`
	// By names who sent it (at most 256 bytes).
	By string `json:"by,omitempty"`
}

// Sent is what the send Update returns.
type Sent struct {
	// TurnID is the child AgentTurn that answers the message.
	TurnID string `json:"turn_id"`
	// Queued is set when another turn runs (or the session is about to
	// continue as new): the message waits, and the turn starts later
	// under TurnID. Otherwise the turn has started.
	Queued bool `json:"queued,omitempty"`
}

// End is the payload of the end Update; both fields are optional.
type End struct {
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// SessionStatus is where a session has got to.
type SessionStatus string

const (
	// SessionOpen takes messages, whether a turn runs or not.
	SessionOpen SessionStatus = "open"
	// SessionEnded was closed by end or by cancelling the workflow.
	SessionEnded SessionStatus = "ended"
	// SessionTransferred: a turn handed the conversation to another
	// agent, so the session takes no more messages (Transfer says who).
	SessionTransferred SessionStatus = "transferred"
)

// Conversation is what the conversation Query returns: bounded however
// many turns the session has run.
type Conversation struct {
	Status SessionStatus `json:"status"`
	// Running is the id of the turn running now; empty while idle.
	Running string `json:"running,omitempty"`
	// Turns are the most recent turns (at most RecentTurns, the running
	// one last), oldest first; Earlier counts the ones before them.
	Turns   []TurnRecord `json:"turns"`
	Earlier TurnCounts   `json:"earlier"`
	// Pending are the messages waiting for their turn, in order (their
	// text cut at 4 KiB here; the session keeps it whole).
	Pending []Queued `json:"pending"`
	// TurnsStarted counts every turn the session has started.
	TurnsStarted int `json:"turns_started"`
	// Runs counts how often the session has continued as new.
	Runs int `json:"runs"`
	// InvalidSignals counts send Signals that were dropped (invalid, or
	// the queue was full); LastInvalidSignal says why the last one was.
	InvalidSignals    int    `json:"invalid_signals"`
	LastInvalidSignal string `json:"last_invalid_signal,omitempty"`
	// Transfer is the target when the status is transferred.
	Transfer *results.Transfer `json:"transfer,omitempty"`
	// Agent is the named agent holding the conversation in a session of
	// agents, and Holders say who held it when, oldest first (at most
	// RecentTurns handoffs). A transfer there hands the conversation to
	// the target and the session stays open.
	Agent   string      `json:"agent,omitempty"`
	Holders []AgentHold `json:"holders,omitempty"`
	// EndedBy and EndReason say who closed an ended session, and why.
	EndedBy   string `json:"ended_by,omitempty"`
	EndReason string `json:"end_reason,omitempty"`
	// Spent is what the session's ended turns used together (tokens,
	// cost, model and tool calls; wall time since the session began);
	// Budget is set for a session with a budget.
	Spent  *Spent       `json:"spent,omitempty"`
	Budget *BudgetState `json:"budget,omitempty"`
}

// TurnRecord is one turn as the session saw it.
type TurnRecord struct {
	ID string `json:"id"`
	// Agent is the named agent that ran the turn, in a session of agents.
	Agent string `json:"agent,omitempty"`
	// Status is the turn's: running while it runs (the turn's own state
	// Query tells running from waiting), then how it ended.
	Status Status `json:"status"`
	// Text is the person's message and By who sent it.
	Text string `json:"text"`
	By   string `json:"by,omitempty"`
	// Reply is the turn's final text. Text and Reply are cut at 4 KiB
	// (marked "[truncated]"); the turn's result has them whole.
	Reply    string            `json:"reply,omitempty"`
	Error    string            `json:"error,omitempty"`
	Transfer *results.Transfer `json:"transfer,omitempty"`
	// Tokens and Cost are what the ended turn's model calls used.
	Tokens int     `json:"tokens,omitempty"`
	Cost   float64 `json:"cost,omitempty"`
	// Waiting are the running turn's calls that wait for a person. The
	// workflow cannot look inside its child, so the Query leaves this
	// empty; tollgate.Client.Conversation fills it from the turn's state.
	Waiting   []results.Card `json:"waiting,omitempty"`
	StartedAt time.Time      `json:"started_at"`
	EndedAt   *time.Time     `json:"ended_at,omitempty"`

	// startFailed: the child could not be started at all, so the send
	// Update that waited for it reports an error instead of its id.
	startFailed bool
}

// TurnCounts counts turns by how they ended.
type TurnCounts struct {
	Total    int            `json:"total"`
	ByStatus map[Status]int `json:"by_status,omitempty"`
}

// Queued is a message waiting for its turn.
type Queued struct {
	TurnID string    `json:"turn_id"`
	Text   string    `json:"text"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
	// Handoff marks the turn an agent takes at once when the conversation
	// is handed to it: it has no message, and answers the conversation as
	// it stands.
	Handoff bool `json:"handoff,omitempty"`
}

// SessionResult is what a session returns when it ends.
type SessionResult struct {
	Conversation
	// Head and Messages are where the conversation stands, to go on with
	// it elsewhere (the agent a transfer names, say): a new session's
	// Turn.Head and Turn.Messages.
	Head     string            `json:"head,omitempty"`
	Messages []results.Message `json:"messages,omitempty"`
}
