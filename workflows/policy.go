package workflows

import (
	"fmt"
	"sort"
	"time"

	"github.com/tollgate-dev/tollgate/tool"
)

// validateInput rejects a turn that cannot run, with a sentence saying why.
func validateInput(in Input) error {
	if in.Prompt == "" && len(in.Messages) == 0 {
		return fmt.Errorf("the turn has neither a prompt nor messages")
	}
	if in.Model == "" {
		return fmt.Errorf("the turn names no model (for example scripted:demo or openai:gpt-4.1)")
	}
	if in.MaxSteps < 0 {
		return fmt.Errorf("max_steps is %d; it must be positive (or omitted for %d)", in.MaxSteps, DefaultMaxSteps)
	}
	names := make([]string, 0, len(in.Policy.Approval))
	//workflowcheck:ignore keys are sorted before use
	for name := range in.Policy.Approval {
		names = append(names, name)
	}
	// Sorted, so that with several bad entries the same one is reported on
	// every run.
	sort.Strings(names)
	for _, name := range names {
		if a := in.Policy.Approval[name]; a != string(tool.ApprovalAlways) && a != string(tool.ApprovalNever) {
			return fmt.Errorf("policy.approval[%q] is %q; it must be always or never", name, a)
		}
	}
	if in.Policy.ResponseTimeout < 0 {
		return fmt.Errorf("policy.response_timeout must not be negative")
	}
	switch in.Policy.OnTimeout {
	case "", OnTimeoutDeny:
	default:
		return fmt.Errorf("policy.on_timeout is %q; the only supported value is deny", in.Policy.OnTimeout)
	}
	if err := validateLimits(in.Policy); err != nil {
		return err
	}
	if err := validateBudget(in.Policy); err != nil {
		return err
	}
	if err := validateCompaction(in.Policy); err != nil {
		return err
	}
	if sb := in.SessionBudget; sb != nil {
		if err := nonNegative("session_budget", sb.Limit); err != nil {
			return err
		}
	}
	if c := in.Caller; c != nil {
		if c.Budget != nil {
			if err := nonNegative("caller.budget", *c.Budget); err != nil {
				return err
			}
		}
		if err := validateBudget(Policy{OnBudget: c.OnBudget}); err != nil {
			return fmt.Errorf("caller: %w", err)
		}
	}
	if err := validateMetadata(in.Metadata); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, t := range in.Tools {
		if seen[t] {
			return fmt.Errorf("tool %q is listed twice", t)
		}
		seen[t] = true
	}
	return nil
}

// needsApproval applies the rule that the worker's default is a floor: the
// turn can raise a tool to always, never lower it.
func (p Policy) needsApproval(spec tool.Spec) bool {
	if spec.Approval == tool.ApprovalAlways {
		return true
	}
	if a, ok := p.Approval[spec.Name]; ok {
		return a == string(tool.ApprovalAlways)
	}
	return p.Approval["*"] == string(tool.ApprovalAlways)
}

func (p Policy) responseTimeout() time.Duration {
	if p.ResponseTimeout > 0 {
		return time.Duration(p.ResponseTimeout)
	}
	return DefaultResponseTimeout
}
