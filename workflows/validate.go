package workflows

import "fmt"

// ValidateInput says why a turn's input cannot run, before anything starts
// it: the gateway answers 400 with the sentence instead of starting a turn
// that fails at once as InvalidTurnInput. AgentTurn checks the same rules
// itself, for starters that skip this.
func ValidateInput(in Input) error {
	if in.Continued != nil {
		return fmt.Errorf("continued is what a turn hands its next run when it continues as new; a new turn leaves it empty")
	}
	if in.Resolved != nil {
		return fmt.Errorf("resolved is what a turn records of its agents; a new turn leaves it empty")
	}
	if in.Agent != "" && in.Model == "" {
		// The agent's model; the worker checks the rest when it resolves
		// the agent.
		in.Model = "agent"
	}
	if in.SessionBudget != nil {
		return fmt.Errorf("session_budget is what a session hands its turns; a turn of its own is bounded by policy.budget")
	}
	return validateInput(in)
}
