package policy

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Tool is what a rule knows of a tool: its name, its argument schema
// and the spec fields rules may read as tool.<field>.
type Tool struct {
	Name   string
	Schema json.RawMessage
	// Approval is the tool's own default, "never" or "always".
	Approval   string
	Idempotent bool
	Concurrent bool
	Workspace  bool
	Local      bool
	Previews   bool
}

// Call is one tool call as rules see it.
type Call struct {
	Tool string
	// Args are the call's arguments, already valid for the tool's schema.
	Args json.RawMessage
	// User started the turn; Model answers in it; Step is the turn's
	// step (1 for the first model reply).
	User  string
	Model string
	Step  int
	// Agent is the named agent the turn runs (empty for none); Metadata
	// is the turn's metadata, as its starter set it.
	Agent    string
	Metadata map[string]string
}

// Decision is what the rules made of a call. The zero Decision (no
// action) means no rule matched: the tool's own approval default holds.
type Decision struct {
	Action Action `json:"action,omitempty"`
	// Rule names the rule that decided.
	Rule string `json:"rule,omitempty"`
	// Reason is the rule's sentence: for a deny, what the model reads;
	// for require_approval, what people deciding read.
	Reason         string    `json:"reason,omitempty"`
	Group          string    `json:"group,omitempty"`
	Quorum         int       `json:"quorum,omitempty"`
	SeparateDuties bool      `json:"separate_duties,omitempty"`
	Escalate       *Escalate `json:"escalate,omitempty"`
}

// Set is a compiled set of rules for a set of tools. It is safe for
// concurrent use.
type Set struct {
	// byTool holds, for each tool, the rules that apply to it in file
	// order, with their programs compiled against its schema.
	byTool map[string]*toolRules
	// Skipped says which rules name tools the worker does not offer; the
	// worker logs them. A policy file may serve workers with different
	// tools, so they are not errors.
	Skipped []string
}

type toolRules struct {
	p    *shapes
	args *shape
	tool ref.Val
	// workspace tools' paths reach rules cleaned (workspacePath).
	workspace bool
	rules     []compiled
}

type compiled struct {
	rule Rule
	// prg is nil for a rule without a when: it always matches.
	prg cel.Program
}

// costLimit bounds what one rule may cost to evaluate: the rules are the
// operator's, but the arguments they walk are the model's.
const costLimit = 1_000_000

// Compile checks rules against tools: each rule's when must be a bool
// expression over tool, args, turn and step, and every field it reads
// from args must be in the argument schema of each tool it applies to.
// The error is a sentence naming the rule and what is wrong.
func Compile(rules []Rule, tools []Tool) (*Set, error) {
	seen := map[string]bool{}
	known := map[string]bool{}
	for _, t := range tools {
		known[t.Name] = true
	}
	for _, r := range rules {
		if err := r.validate(seen); err != nil {
			return nil, err
		}
	}
	s := &Set{byTool: map[string]*toolRules{}}
	for _, r := range rules {
		for _, name := range r.Tools {
			if !known[name] {
				// One policy file serves workers with different tools.
				s.Skipped = append(s.Skipped, fmt.Sprintf("rule %q names tool %q, which this worker does not offer", r.Name, name))
			}
		}
	}
	p, err := newShapes()
	if err != nil {
		return nil, err
	}
	type toolEnv struct {
		env *cel.Env
		tr  *toolRules
	}
	envs := make([]toolEnv, 0, len(tools))
	for i, t := range tools {
		args, err := p.fromSchema(t.Schema, fmt.Sprintf("tollgate.args%d", i))
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		if args.kind == dynShape {
			args = &shape{kind: mapShape}
		}
		envs = append(envs, toolEnv{tr: &toolRules{p: p, args: args, tool: types.NewStringInterfaceMap(p, toolValue(t)), workspace: t.Workspace}})
	}
	if err := p.addFixed(); err != nil {
		return nil, err
	}
	for i := range envs {
		env, err := cel.NewEnv(
			cel.CustomTypeProvider(p),
			cel.Variable("tool", cel.ObjectType(toolType)),
			cel.Variable("args", envs[i].tr.args.celType()),
			cel.Variable("turn", cel.ObjectType(turnType)),
			cel.Variable("step", cel.IntType),
		)
		if err != nil {
			return nil, fmt.Errorf("rule environment for tool %s: %w", tools[i].Name, err)
		}
		envs[i].env = env
	}
	for i, t := range tools {
		e := envs[i]
		for _, r := range rules {
			if len(r.Tools) > 0 && !slices.Contains(r.Tools, t.Name) {
				continue
			}
			c := compiled{rule: r}
			if strings.TrimSpace(r.When) != "" {
				prg, err := compileWhen(e.env, r, t.Name, e.tr.args)
				if err != nil {
					return nil, err
				}
				c.prg = prg
			}
			e.tr.rules = append(e.tr.rules, c)
		}
		// Deny first, then require_approval, then allow: Decide's
		// precedence, in the order it can stop early.
		rank := map[Action]int{ActionDeny: 0, ActionRequireApproval: 1, ActionAllow: 2}
		slices.SortStableFunc(e.tr.rules, func(a, b compiled) int { return rank[a.rule.Action] - rank[b.rule.Action] })
		s.byTool[t.Name] = e.tr
	}
	return s, nil
}

var undefinedField = regexp.MustCompile(`undefined field '([^']*)'`)

func compileWhen(env *cel.Env, r Rule, tool string, args *shape) (cel.Program, error) {
	ast, iss := env.Compile(r.When)
	if iss.Err() != nil {
		msg := iss.Err().Error()
		if m := undefinedField.FindStringSubmatch(msg); m != nil {
			have := ""
			if args.kind == objectShape {
				have = " (its arguments are: " + args.fieldNames() + ")"
			}
			return nil, fmt.Errorf("rule %q reads field %q, which tool %s does not have%s; limit the rule with tools: or fix the name", r.Name, m[1], tool, have)
		}
		return nil, fmt.Errorf("rule %q: when does not compile for tool %s: %s", r.Name, tool, firstLine(msg))
	}
	if ast.OutputType() != cel.BoolType {
		return nil, fmt.Errorf("rule %q: when is %s, not a bool, for tool %s", r.Name, ast.OutputType(), tool)
	}
	prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("rule %q: program for tool %s: %w", r.Name, tool, err)
	}
	return prg, nil
}

func firstLine(s string) string {
	s = strings.TrimPrefix(s, "ERROR: <input>:")
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Names of the fixed types rules see.
const (
	toolType = "tollgate.Tool"
	turnType = "tollgate.Turn"
)

func (p *shapes) addFixed() error {
	p.objects[toolType] = &shape{kind: objectShape, name: toolType, fields: map[string]*shape{
		"name":       {kind: stringShape},
		"approval":   {kind: stringShape},
		"idempotent": {kind: boolShape},
		"concurrent": {kind: boolShape},
		"workspace":  {kind: boolShape},
		"local":      {kind: boolShape},
		"previews":   {kind: boolShape},
	}}
	p.objects[turnType] = &shape{kind: objectShape, name: turnType, fields: map[string]*shape{
		"user":     {kind: stringShape},
		"model":    {kind: stringShape},
		"agent":    {kind: stringShape},
		"metadata": {kind: stringMapShape},
	}}
	return nil
}

func toolValue(t Tool) map[string]any {
	return map[string]any{
		"name": types.String(t.Name), "approval": types.String(t.Approval), "idempotent": types.Bool(t.Idempotent),
		"concurrent": types.Bool(t.Concurrent), "workspace": types.Bool(t.Workspace), "local": types.Bool(t.Local), "previews": types.Bool(t.Previews),
	}
}

// activation holds one call's variables, converted once for all rules.
type activation struct {
	tool, args, turn, step ref.Val
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "tool":
		return a.tool, true
	case "args":
		return a.args, true
	case "turn":
		return a.turn, true
	case "step":
		return a.step, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// Len counts the rules that apply to a tool.
func (s *Set) Len(tool string) int {
	if s == nil || s.byTool[tool] == nil {
		return 0
	}
	return len(s.byTool[tool].rules)
}

// Knows reports whether tool was among the tools s was compiled for.
func (s *Set) Knows(tool string) bool {
	_, ok := s.byTool[tool]
	return ok
}

// Decide applies the rules to one call. Precedence: a matching deny beats
// everything; otherwise the first matching require_approval holds;
// otherwise a matching allow; otherwise no decision. A rule that fails to
// evaluate (a cost limit, a type the schema left open) counts as a
// require_approval by that rule: an error never lets a call through
// unasked, and never refuses it without a person seeing why.
func (s *Set) Decide(c Call) Decision {
	if s == nil {
		return Decision{}
	}
	tr := s.byTool[c.Tool]
	if tr == nil || len(tr.rules) == 0 {
		return Decision{}
	}
	var args any
	if len(c.Args) > 0 {
		if err := json.Unmarshal(c.Args, &args); err != nil {
			return Decision{Action: ActionRequireApproval, Rule: "(arguments)", Reason: "the arguments could not be read for the approval rules, so a person decides"}
		}
	}
	if args == nil {
		args = map[string]any{}
	}
	if tr.workspace {
		cleanWorkspacePath(args)
	}
	act := &activation{
		tool: tr.tool,
		args: tr.p.NativeToValue(tr.p.toVal(tr.args, args)),
		turn: types.NewStringInterfaceMap(tr.p, map[string]any{"user": types.String(c.User), "model": types.String(c.Model),
			"agent": types.String(c.Agent), "metadata": types.NewStringStringMap(tr.p, metadata(c.Metadata))}),
		step: types.Int(c.Step),
	}
	// Rules are held deny first, then require_approval, then allow, each
	// in file order (Compile), so evaluation stops at the first rule that
	// settles the decision.
	var require *Decision
	for _, cr := range tr.rules {
		r := cr.rule
		if require != nil && r.Action != ActionDeny {
			break
		}
		matched, err := cr.matches(act)
		if err != nil {
			if require == nil {
				require = &Decision{Action: ActionRequireApproval, Rule: r.Name, Reason: fmt.Sprintf("rule %s could not be evaluated for this call (%s), so a person decides", r.Name, clip(err.Error(), 200))}
			}
			continue
		}
		if !matched {
			continue
		}
		switch r.Action {
		case ActionDeny:
			return Decision{Action: ActionDeny, Rule: r.Name, Reason: r.Reason}
		case ActionRequireApproval:
			d := Decision{Action: ActionRequireApproval, Rule: r.Name, Reason: r.Reason, Group: r.Group, Quorum: max(r.Quorum, 1), SeparateDuties: r.SeparateDuties}
			if r.Escalate != nil {
				e := *r.Escalate
				d.Escalate = &e
			}
			require = &d
		case ActionAllow:
			return Decision{Action: ActionAllow, Rule: r.Name, Reason: r.Reason}
		}
	}
	if require != nil {
		return *require
	}
	return Decision{}
}

// metadata is never nil: a rule reads a turn without metadata as an
// empty map.
func metadata(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func (c compiled) matches(act interpreter.Activation) (bool, error) {
	if c.prg == nil {
		return true, nil
	}
	out, _, err := c.prg.Eval(act)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	return ok && b, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// cleanWorkspacePath gives rules a workspace tool's path as the tool will
// resolve it, lexically: "drafts/../main.go" is "main.go", so a rule that
// lets "drafts/" through does not let the model write anywhere by way of
// it. A path that still climbs ("../x") or is absolute matches no
// relative prefix, so a rule written for the workspace asks for it.
func cleanWorkspacePath(args any) {
	m, ok := args.(map[string]any)
	if !ok {
		return
	}
	if p, ok := m["path"].(string); ok && p != "" {
		m["path"] = path.Clean(p)
	}
}
