package workflows

import (
	"encoding/json"
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
)

// Live events of a turn: its card changes, status changes and result,
// published to the worker's stream.Publisher (Features.Events) as they
// happen. Text deltas and tool progress come from the activities.
//
// None of this enters history: publishing creates no command, and a
// workflow that replays publishes nothing (workflow.IsReplaying). What is
// published is derived from the turn's state alone, and each event's key
// from the run and the history length at the workflow task that published
// it, so a task run again on another worker after a crash publishes the
// same keys, which JetStream's dedupe drops.

// liveEvents is a turn's publishing state. It is rebuilt on replay like
// every other part of the turn, but only a task that is not replaying
// sends anything.
type liveEvents struct {
	pub     stream.Publisher
	turn    string
	session string
	run     string
	// parent and parentCall are the turn and call that called this
	// turn's agent; a called agent's turn files its events under no
	// session (its parent is a turn, not a session).
	parent, parentCall string
	// cards is what was last published of each call's card; status is
	// the last published status.
	cards  map[string]cardMark
	status Status
	// task and seq number the events of one workflow task, for their keys.
	task int
	seq  int
}

// cardMark is what tells two versions of a card apart for watchers.
type cardMark struct {
	state     results.State
	queued    bool
	decisions int
	edited    bool
	escalated bool
	// agentWaits is what waits in the agent the call runs, so that the
	// calling card is published again when a child's wait comes or goes.
	agentWaits string
	// rule, group and quorum change when a re-evaluation changes what a
	// waiting call needs.
	rule, group string
	quorum      int
}

func markOf(c results.Card) cardMark {
	m := cardMark{state: c.State, queued: c.Queued, decisions: len(c.Decisions), edited: len(c.EditedArguments) > 0}
	if a := c.Approval; a != nil {
		m.escalated, m.rule, m.group, m.quorum = a.Escalated, a.Rule, a.Group, a.Quorum
	}
	if c.Agent != nil {
		m.agentWaits = waitKey(c.Agent.Waiting)
	}
	return m
}

// startEvents begins publishing the turn's live events, when the worker
// has a publisher. It watches the turn's state from a coroutine of its own
// that waits on a condition and so schedules nothing.
func (t *turn) startEvents(ctx workflow.Context, f Features) {
	if f.Events == nil {
		return
	}
	info := workflow.GetInfo(ctx)
	e := &liveEvents{pub: f.Events, turn: t.id, run: info.WorkflowExecution.RunID, cards: map[string]cardMark{}}
	if e.parent, e.parentCall = t.callerOf(ctx); e.parent == "" {
		if p := info.ParentWorkflowExecution; p != nil {
			e.session = p.ID
		}
	}
	t.events = e
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			if err := workflow.Await(ctx, func() bool { return e.changed(t) }); err != nil {
				return
			}
			e.publishChanges(ctx, t)
		}
	})
}

// session is the session the turn's events are filed under: its parent's
// workflow id, empty for a turn of its own.
func (t *turn) streamSession() string {
	if t.events == nil {
		return ""
	}
	return t.events.session
}

func (e *liveEvents) changed(t *turn) bool {
	if t.currentStatus() != e.status {
		return true
	}
	for _, c := range t.calls {
		if m, ok := e.cards[c.card.CallID]; !ok || m != markOf(c.card) {
			return true
		}
	}
	return false
}

func (e *liveEvents) publishChanges(ctx workflow.Context, t *turn) {
	for _, c := range t.calls {
		m := markOf(c.card)
		if old, ok := e.cards[c.card.CallID]; ok && old == m {
			continue
		}
		e.cards[c.card.CallID] = m
		card := c.card
		if card.Agent != nil {
			// The turn goes on changing its agent call; the publisher
			// may encode the event later.
			a := *card.Agent
			a.Waiting = slices.Clone(a.Waiting)
			card.Agent = &a
		}
		e.send(ctx, stream.Event{Type: stream.TypeCard, Card: &card, ToolCallID: card.CallID})
	}
	if s := t.currentStatus(); s != e.status {
		e.status = s
		e.send(ctx, stream.Event{Type: stream.TypeStatus, Status: string(s)})
	}
}

// liveResult is what a result event carries: the turn's outcome without
// its messages, which the result endpoint returns.
type liveResult struct {
	Status Status      `json:"status"`
	Text   string      `json:"text,omitempty"`
	Error  string      `json:"error,omitempty"`
	Steps  int         `json:"steps"`
	Usage  model.Usage `json:"usage"`
	// Cost and Compactions are as in Result.
	Cost        float64 `json:"cost,omitempty"`
	Compactions int     `json:"compactions,omitempty"`
}

// streamEnd publishes the turn's last changes and its result.
func (t *turn) streamEnd(ctx workflow.Context) {
	e := t.events
	if e == nil {
		return
	}
	e.publishChanges(ctx, t)
	res, err := json.Marshal(liveResult{Status: t.status, Text: t.text, Error: t.failure, Steps: t.step, Usage: t.usage, Cost: t.cost, Compactions: t.compactions})
	if err != nil {
		return
	}
	e.send(ctx, stream.Event{Type: stream.TypeResult, Status: string(t.status), Result: res})
}

func (e *liveEvents) send(ctx workflow.Context, ev stream.Event) {
	info := workflow.GetInfo(ctx)
	if n := info.GetCurrentHistoryLength(); n != e.task {
		e.task, e.seq = n, 0
	}
	e.seq++
	if workflow.IsReplaying(ctx) {
		return
	}
	ev.Turn, ev.Session, ev.Time = e.turn, e.session, workflow.Now(ctx).UTC()
	ev.Parent, ev.ParentCall = e.parent, e.parentCall
	ev.Key = fmt.Sprintf("%s/%d/%d", e.run, e.task, e.seq)
	e.pub.Publish(ev)
}
