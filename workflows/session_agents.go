package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/results"
)

// handsOff reports whether a transfer hands the conversation on rather
// than end the session: in a session of named agents, where the turn's
// agent checked the target against its handoffs.
func (s *session) handsOff() bool {
	return s.agents && s.agent != ""
}

// turnInput is what the next turn runs with. The session's turn fields
// narrow the agent it started with; an agent handed the conversation
// runs as it is defined, for the same user.
func (s *session) turnInput() Input {
	in := s.in.Turn
	if !s.handsOff() || s.agent == in.Agent {
		return in
	}
	return Input{Agent: s.agent, User: in.User, Params: in.Params}
}

// handOff gives the conversation to the transfer's target: from the next
// message on, or at once, when the transfer asked for it and no message
// waits to be answered first (the target answers that one anyway).
func (s *session) handOff(ctx workflow.Context, turnID string, tr *results.Transfer) {
	now := tr.Now && len(s.pending) == 0 && len(s.unstored) > 0
	s.holders = append(s.holders, AgentHold{
		Agent: tr.Target, Since: workflow.Now(ctx), From: s.agent, Turn: turnID,
		Message: excerpt(tr.Message), Now: tr.Now,
	})
	if len(s.holders) > RecentTurns {
		s.holders = append([]AgentHold(nil), s.holders[len(s.holders)-RecentTurns:]...)
	}
	workflow.GetLogger(ctx).Info("Conversation handed off", "from", s.agent, "to", tr.Target, "now", now)
	s.agent = tr.Target
	if now {
		id := fmt.Sprintf("%s/turn-%d", s.id, s.next)
		s.next++
		s.pending = append(s.pending, Queued{TurnID: id, By: s.holders[len(s.holders)-1].From, At: workflow.Now(ctx), Handoff: true})
	}
}
