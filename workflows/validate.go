package workflows

// ValidateInput says why a turn's input cannot run, before anything starts
// it: the gateway answers 400 with the sentence instead of starting a turn
// that fails at once as InvalidTurnInput. AgentTurn checks the same rules
// itself, for starters that skip this.
func ValidateInput(in Input) error { return validateInput(in) }
