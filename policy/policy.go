// Package policy holds the worker's approval rules: CEL expressions over a
// tool call (the tool, its arguments typed from the tool's JSON schema, the
// turn and the step) that say whether the call runs, waits for people, or
// is refused. Rules are compiled and type-checked against every tool's
// argument schema when the worker starts, so a rule naming a field a
// schema lacks stops the worker with a sentence instead of misfiring on a
// call. The package has no Temporal dependency: the workflow evaluates a
// Set once per call, inside a SideEffect, and records the Decision.
package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"gopkg.in/yaml.v3"
)

// Action is what a matching rule does with a call.
type Action string

const (
	// ActionAllow runs the call without asking.
	ActionAllow Action = "allow"
	// ActionRequireApproval parks the call until people approve it.
	ActionRequireApproval Action = "require_approval"
	// ActionDeny refuses the call; the model reads the rule's reason.
	ActionDeny Action = "deny"
)

// Rule is one approval rule.
type Rule struct {
	// Name names the rule on cards, in errors and in the decision history
	// records.
	Name string `json:"name" yaml:"name"`
	// Tools limits the rule to these tools; empty: every tool. A rule
	// that reads args is checked against each tool it applies to.
	Tools []string `json:"tools,omitempty" yaml:"tools,omitempty"`
	// When is a CEL expression of type bool over tool, args, turn and
	// step; empty means true.
	When   string `json:"when,omitempty" yaml:"when,omitempty"`
	Action Action `json:"action" yaml:"action"`
	// Reason: for deny, the sentence the model reads; for
	// require_approval, the sentence people deciding read.
	Reason string `json:"reason,omitempty" yaml:"reason,omitempty"`
	// Group, for require_approval, is the group whose members may
	// answer; empty: anyone who may respond.
	Group string `json:"group,omitempty" yaml:"group,omitempty"`
	// Quorum, for require_approval, is how many distinct people must
	// approve (default 1). One deny refuses the call.
	Quorum int `json:"quorum,omitempty" yaml:"quorum,omitempty"`
	// SeparateDuties bars the turn's user (the one who started it) from
	// approving.
	SeparateDuties bool `json:"separate_duties,omitempty" yaml:"separate_duties,omitempty"`
	// Escalate, for require_approval, announces a call nobody answered
	// in time and may widen who may answer.
	Escalate *Escalate `json:"escalate,omitempty" yaml:"escalate,omitempty"`
}

// Escalate says when a wait escalates and to whom.
type Escalate struct {
	After Duration `json:"after" yaml:"after"`
	// Group, when set, may answer from then on as well as Rule.Group.
	Group string `json:"group,omitempty" yaml:"group,omitempty"`
}

// Duration is a time.Duration written as "30m" or "2h" in policy files.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30m\" or \"2h\": %w", err)
	}
	return d.set(s)
}

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("a duration is a string such as 30m or 2h: %w", err)
	}
	return d.set(s)
}

func (d *Duration) set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 30m or 2h", s)
	}
	*d = Duration(v)
	return nil
}

// File is a policy file: {"rules": [...]}, in YAML or JSON.
type File struct {
	Rules []Rule `json:"rules" yaml:"rules"`
}

// Parse reads a policy file's rules. JSON is YAML, but it is decoded as
// JSON when it looks like it, for JSON's own error messages.
func Parse(data []byte) ([]Rule, error) {
	var f File
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("read policy JSON: %w", err)
		}
		return f.Rules, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("read policy YAML: %w", err)
	}
	return f.Rules, nil
}

// Load reads the policy file at path.
func Load(path string) ([]Rule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policy file: %w", err)
	}
	rules, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", filepath.Base(path), err)
	}
	return rules, nil
}

// validate checks what does not need CEL.
func (r Rule) validate(seen map[string]bool) error {
	if r.Name == "" {
		return fmt.Errorf("a rule has no name (when: %q)", r.When)
	}
	if seen[r.Name] {
		return fmt.Errorf("rule %q is defined twice", r.Name)
	}
	seen[r.Name] = true
	switch r.Action {
	case ActionAllow, ActionDeny:
		if r.Group != "" || r.Quorum != 0 || r.SeparateDuties || r.Escalate != nil {
			return fmt.Errorf("rule %q: group, quorum, separate_duties and escalate only go with require_approval", r.Name)
		}
		if r.Action == ActionDeny && strings.TrimSpace(r.Reason) == "" {
			return fmt.Errorf("rule %q denies without a reason; the model reads the reason to know what to do instead", r.Name)
		}
	case ActionRequireApproval:
		if r.Quorum < 0 || r.Quorum > MaxQuorum {
			return fmt.Errorf("rule %q: quorum is %d; it must be between 1 and %d", r.Name, r.Quorum, MaxQuorum)
		}
		if e := r.Escalate; e != nil && e.After <= 0 {
			return fmt.Errorf("rule %q: escalate.after must be a positive duration such as 30m", r.Name)
		}
	case "":
		return fmt.Errorf("rule %q has no action (allow, require_approval or deny)", r.Name)
	default:
		return fmt.Errorf("rule %q: action %q is not allow, require_approval or deny", r.Name, r.Action)
	}
	return nil
}

// MaxQuorum bounds a rule's quorum; a card lists every approver.
const MaxQuorum = 16

// Check checks what can be checked of rules before any tool is known:
// names, actions and their fields, and that each when parses. Compile
// checks the rest against the tools' schemas; a worker runs Check as it
// reads its policy file, so a bad file stops it before it starts any
// server.
func Check(rules []Rule) error {
	seen := map[string]bool{}
	env, err := cel.NewEnv()
	if err != nil {
		return fmt.Errorf("cel environment: %w", err)
	}
	for _, r := range rules {
		if err := r.validate(seen); err != nil {
			return err
		}
		if strings.TrimSpace(r.When) == "" {
			continue
		}
		if _, iss := env.Parse(r.When); iss.Err() != nil {
			return fmt.Errorf("rule %q: when does not parse: %s", r.Name, firstLine(iss.Err().Error()))
		}
	}
	return nil
}
