package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// A session's budget bounds all its turns together. The session counts
// what each ended turn used and hands the next turn its budget with what
// the turns before used (Input.SessionBudget); the turn checks it before
// every model call as it checks its own, and parks on the same kind of
// wait when it is reached. Approving raises the session's budget, which
// the turn hands back in Result.SessionBudget.

// startBudget takes up the session's budget and what its turns used,
// from the input or from the run before.
func (s *session) startBudget(ctx workflow.Context) {
	s.budget, s.startedAt = s.in.Budget, workflow.Now(ctx)
	if c := s.in.Carried; c != nil {
		if c.Budget != (Budget{}) {
			s.budget = c.Budget
		}
		if c.Spent != nil {
			s.spent = *c.Spent
		}
		if c.StartedAt != nil {
			s.startedAt = *c.StartedAt
		}
	}
}

// turnBudget is what a turn of the session is handed: nil without a
// session budget.
func (s *session) turnBudget() *SessionBudget {
	if !s.budgets || s.budget.empty() {
		return nil
	}
	spent := s.spent
	// Calls of unknown cost are asked about in the turn that makes them;
	// a person who let one turn go on is not asked again by the next.
	spent.Unpriced = 0
	return &SessionBudget{Limit: s.budget, Spent: spent, StartedAt: s.startedAt}
}

// account adds what an ended turn used to the session's spending, and
// takes up the session's budget as the turn's people may have raised it.
func (s *session) account(rec *TurnRecord, res Result) {
	if !s.budgets {
		return
	}
	tokens := res.Usage.InputTokens + res.Usage.OutputTokens
	rec.Tokens, rec.Cost = tokens, res.Cost
	s.spent.Tokens += tokens
	s.spent.Cost += res.Cost
	s.spent.Unpriced += res.UnpricedCalls
	s.spent.ModelCalls += res.Steps
	s.spent.ToolCalls += res.ToolCalls
	if b := res.SessionBudget; b != nil {
		s.budget = b.Limit
		s.spent.WallTime = b.Spent.WallTime
	}
}
