package tollgate

import (
	"fmt"
	"sync"

	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/tool"
)

// liveRules are the worker's approval rules over the tools it has now.
// They are checked at start against the tools the worker has then; a tool
// that an MCP server adds later (tool.Source) was not among them, so the
// first call of it checks the rules against that tool's schema, and the
// rules meant for it hold. Where they do not compile for it, a person
// decides: a new tool never runs unasked past a rule that may have been
// meant to stop it.
type liveRules struct {
	rules []policy.Rule
	reg   *tool.Registry
	// start is the set checked at start; later holds a set for each tool
	// added since, compiled at its first call.
	start *policy.Set
	mu    sync.Mutex
	later map[string]*policy.Set
}

func newLiveRules(rules []policy.Rule, reg *tool.Registry) (*liveRules, error) {
	set, err := compileRules(rules, reg.Specs())
	if err != nil {
		return nil, err
	}
	return &liveRules{rules: rules, reg: reg, start: set, later: map[string]*policy.Set{}}, nil
}

// Decide decides c by the set that knows its tool. A name the registry
// does not hold (an agent's or a handoff's tool) is left to the set
// checked at start, which has no rules for it.
func (l *liveRules) Decide(c policy.Call) policy.Decision {
	if l.start.Knows(c.Tool) {
		return l.start.Decide(c)
	}
	t, ok := l.reg.Get(c.Tool)
	if !ok {
		return l.start.Decide(c)
	}
	l.mu.Lock()
	set := l.later[c.Tool]
	if set == nil {
		var err error
		if set, err = compileRules(l.rules, []tool.Spec{tool.Describe(t)}); err != nil {
			l.mu.Unlock()
			return policy.Decision{Action: policy.ActionRequireApproval, Rule: "(rules)", Quorum: 1,
				Reason: fmt.Sprintf("tool %s was added after the approval rules were checked, and they do not compile for it, so a person decides", c.Tool)}
		}
		l.later[c.Tool] = set
	}
	l.mu.Unlock()
	return set.Decide(c)
}

// compileRules checks the approval rules against tools.
func compileRules(rules []policy.Rule, specs []tool.Spec) (*policy.Set, error) {
	var tools []policy.Tool
	for _, s := range specs {
		tools = append(tools, policy.Tool{Name: s.Name, Schema: s.Schema, Approval: string(s.Approval),
			Idempotent: s.Idempotent, Concurrent: s.Concurrent, Workspace: s.Workspace, Local: s.Local, Previews: s.Previews})
	}
	set, err := policy.Compile(rules, tools)
	if err != nil {
		return nil, fmt.Errorf("tollgate: approval rules: %w", err)
	}
	return set, nil
}
