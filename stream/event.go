// Package stream carries the live events of turns and sessions: text as
// the model writes it, tool calls as it emits them, tool progress, card
// changes, status changes and the result. Events travel over NATS
// JetStream, one subject per turn, kept for a bounded time and size, so a
// watcher that reconnects resumes from the last event id it saw.
//
// Streaming is best effort and outside workflow history: publishing never
// fails a turn and never waits for NATS, and a turn whose events were
// lost still has its whole state in the workflow (the state query, the
// result). Nothing here is recorded by Temporal.
package stream

import (
	"encoding/json"
	"time"

	"github.com/tollgate-dev/tollgate/results"
)

// Type says what an Event carries.
type Type string

const (
	// TypeText is a piece of a model call's reply text.
	TypeText Type = "text"
	// TypeToolCall is a piece of a tool call as the model emits it: the
	// first piece of a call has its id and name, later ones pieces of its
	// arguments.
	TypeToolCall Type = "tool_call"
	// TypeReset says a model call is being tried again: the text and tool
	// call pieces it sent so far are void, and its new pieces follow.
	TypeReset Type = "reset"
	// TypeToolProgress is what a running tool reported about its progress.
	TypeToolProgress Type = "tool_progress"
	// TypeCard is a call's card after a change (waiting, running, done).
	TypeCard Type = "card"
	// TypeStatus is the turn's status after a change.
	TypeStatus Type = "status"
	// TypeResult is the turn's result; it is the turn's last event.
	TypeResult Type = "result"
	// TypeCompaction says the turn compacted its conversation before the
	// model call of Step: Compaction says how.
	TypeCompaction Type = "compaction"
	// TypeUsage is one model call's token usage and cost (Usage), with
	// the turn's totals so far.
	TypeUsage Type = "usage"
)

// Event is one thing that happened in a turn.
type Event struct {
	// ID is the event's position in the event log: it increases with
	// every event of a turn (and of a session), though not by one, and is
	// what a watcher resumes after. Publishers leave it zero.
	ID      uint64    `json:"id"`
	Type    Type      `json:"type"`
	Turn    string    `json:"turn"`
	Session string    `json:"session,omitempty"`
	Time    time.Time `json:"time"`
	// Parent and ParentCall name the turn and the call that ran this
	// turn's agent as a tool, so a watcher of the top turn can relate a
	// child's events to the calling card; empty for a turn nobody called.
	Parent     string `json:"parent,omitempty"`
	ParentCall string `json:"parent_call,omitempty"`

	// Call names the model call that text, tool_call and reset events
	// belong to; it stays the same when that call is retried. Step is the
	// turn's step the call is for (1 for the first model call).
	Call    string `json:"call,omitempty"`
	Step    int    `json:"step,omitempty"`
	Attempt int    `json:"attempt,omitempty"`

	// Text is a text event's piece of the reply.
	Text string `json:"text,omitempty"`

	// Index, ToolCallID, ToolName and Arguments are a tool_call event's
	// piece (Index tells apart parallel calls of one reply). ToolCallID
	// also names the call that a tool_progress event is about.
	Index      int    `json:"index,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	Arguments  string `json:"arguments,omitempty"`

	// Progress is what the tool reported, as JSON.
	Progress json.RawMessage `json:"progress,omitempty"`

	// Card is a card event's card.
	Card *results.Card `json:"card,omitempty"`

	// Status is a status or result event's turn status.
	Status string `json:"status,omitempty"`

	// Result is a result event's turn result, as the result endpoint
	// returns it.
	Result json.RawMessage `json:"result,omitempty"`

	// Compaction is a compaction event's account of it.
	Compaction *Compaction `json:"compaction,omitempty"`

	// Usage is a usage event's figures.
	Usage *Usage `json:"usage,omitempty"`

	// Key, when set, makes publishing idempotent: a second event with the
	// same key within the dedupe window is dropped by JetStream. The
	// workflow's events use it, since a workflow task that is run again
	// after a crash publishes them again.
	Key string `json:"-"`

	// encoded is the event as JSON, id included, when it was read from
	// the log: a hub encodes each event once for all its watchers.
	encoded []byte
}

// JSON is the event encoded as JSON, as the events routes send it.
func (e Event) JSON() ([]byte, error) {
	if e.encoded != nil {
		return e.encoded, nil
	}
	return json.Marshal(e)
}

// Compaction is what a compaction event says: the strategy, why
// (threshold: the conversation neared the context window; context_length:
// the provider refused it as too long), how many messages were
// summarised or dropped and how many kept verbatim, and the turn's
// compactions so far.
type Compaction struct {
	Strategy    string `json:"strategy"`
	Reason      string `json:"reason"`
	Compacted   int    `json:"compacted"`
	Kept        int    `json:"kept"`
	Compactions int    `json:"compactions"`
}

// Usage is a usage event's figures: one model call's tokens and cost
// (cost absent when the model has no price), and the turn's totals.
type Usage struct {
	InputTokens  int      `json:"input_tokens"`
	OutputTokens int      `json:"output_tokens"`
	CachedTokens int      `json:"cached_tokens,omitempty"`
	Cost         *float64 `json:"cost,omitempty"`
	// Compaction is set for the call that summarised the conversation.
	Compaction bool `json:"compaction,omitempty"`
	// TurnTokens and TurnCost are the turn's totals after the call.
	TurnTokens int     `json:"turn_tokens"`
	TurnCost   float64 `json:"turn_cost"`
}

// Publisher sends events. Publish never blocks for long and never fails
// the caller: an event that cannot be sent is dropped and counted.
type Publisher interface {
	Publish(Event)
}

// Discard is a Publisher that drops everything: streaming off.
type Discard struct{}

// Publish drops ev.
func (Discard) Publish(Event) {}
