package policy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/policy"
)

var (
	writeFile = policy.Tool{Name: "write_file", Approval: "always", Workspace: true, Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)}
	issue     = policy.Tool{Name: "issue_refund", Schema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"},"reason":{"type":"string"}}}`)}
	refund    = policy.Tool{Name: "refund", Approval: "never", Schema: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"},"amount":{"type":"integer"},"lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}}}}`)}
	tools     = []policy.Tool{writeFile, refund}
)

func TestRulesDecide(t *testing.T) {
	set, err := policy.Compile([]policy.Rule{
		{Name: "drafts", Tools: []string{"write_file"}, When: `args.path.startsWith("drafts/")`, Action: policy.ActionAllow},
		{Name: "secrets", When: `tool.workspace && args.path.contains(".env")`, Tools: []string{"write_file"}, Action: policy.ActionDeny, Reason: "never write .env files"},
		{Name: "big_refund", Tools: []string{"refund"}, When: `args.amount > 500 || args.lines.exists(l, l.qty > 10)`, Action: policy.ActionRequireApproval, Group: "leads", Quorum: 2, Reason: "refunds above 500 need two leads", Escalate: &policy.Escalate{After: policy.Duration(time.Hour), Group: "managers"}},
		{Name: "own_refund", Tools: []string{"refund"}, When: `turn.user == "mallory" && step > 0`, Action: policy.ActionRequireApproval, SeparateDuties: true},
	}, tools)
	require.NoError(t, err)

	d := set.Decide(policy.Call{Tool: "write_file", Args: json.RawMessage(`{"path":"drafts/a.md","content":"x"}`)})
	require.Equal(t, policy.Decision{Action: policy.ActionAllow, Rule: "drafts"}, d)
	d = set.Decide(policy.Call{Tool: "write_file", Args: json.RawMessage(`{"path":"src/a.go","content":"x"}`)})
	require.Equal(t, policy.Decision{}, d, "no rule matches: the tool's default holds")
	d = set.Decide(policy.Call{Tool: "write_file", Args: json.RawMessage(`{"path":"drafts/.env","content":"x"}`)})
	require.Equal(t, policy.Decision{Action: policy.ActionDeny, Rule: "secrets", Reason: "never write .env files"}, d, "deny beats an allow that matched first")

	// A workspace tool's path reaches rules as the tool resolves it: a
	// prefix rule cannot be walked out of with "..", and "./" is the same
	// path as none.
	for p, want := range map[string]policy.Decision{
		"drafts/../main.go":      {},
		"drafts/x/../../main.go": {},
		"drafts/../../etc/x":     {},
		"./drafts/a.md":          {Action: policy.ActionAllow, Rule: "drafts"},
		"drafts//x/../a.md":      {Action: policy.ActionAllow, Rule: "drafts"},
	} {
		require.Equal(t, want, set.Decide(policy.Call{Tool: "write_file", Args: json.RawMessage(`{"path":"` + p + `","content":"x"}`)}), p)
	}

	d = set.Decide(policy.Call{Tool: "refund", Args: json.RawMessage(`{"order":"o1","amount":900}`), Step: 1})
	require.Equal(t, policy.ActionRequireApproval, d.Action)
	require.Equal(t, "big_refund", d.Rule)
	require.Equal(t, 2, d.Quorum)
	require.Equal(t, "leads", d.Group)
	require.Equal(t, time.Hour, time.Duration(d.Escalate.After))
	d = set.Decide(policy.Call{Tool: "refund", Args: json.RawMessage(`{"order":"o1","amount":20,"lines":[{"sku":"a","qty":11}]}`), Step: 1})
	require.Equal(t, "big_refund", d.Rule, "nested objects in lists are typed too")
	d = set.Decide(policy.Call{Tool: "refund", Args: json.RawMessage(`{"order":"o1"}`), User: "mallory", Step: 2})
	require.Equal(t, policy.Decision{Action: policy.ActionRequireApproval, Rule: "own_refund", Quorum: 1, SeparateDuties: true}, d, "an absent amount reads as 0")
	d = set.Decide(policy.Call{Tool: "refund", Args: json.RawMessage(`{"order":"o1","amount":20}`), User: "alice", Step: 2})
	require.Equal(t, policy.Decision{}, d)
}

func TestRuleNamingAMissingFieldRefusesToCompile(t *testing.T) {
	_, err := policy.Compile([]policy.Rule{
		{Name: "big_refund", Tools: []string{"refund"}, When: `args.amonut > 500`, Action: policy.ActionRequireApproval},
	}, tools)
	require.EqualError(t, err, `rule "big_refund" reads field "amonut", which tool refund does not have (its arguments are: amount, lines, order); limit the rule with tools: or fix the name`)

	// A rule for every tool is checked against every tool's schema.
	_, err = policy.Compile([]policy.Rule{{Name: "paths", When: `args.path == "x"`, Action: policy.ActionRequireApproval}}, tools)
	require.ErrorContains(t, err, `rule "paths" reads field "path", which tool refund does not have`)

	_, err = policy.Compile([]policy.Rule{{Name: "typed", Tools: []string{"refund"}, When: `args.amount.startsWith("1")`, Action: policy.ActionAllow}}, tools)
	require.ErrorContains(t, err, `rule "typed": when does not compile for tool refund`)

	_, err = policy.Compile([]policy.Rule{{Name: "notbool", Tools: []string{"refund"}, When: `args.amount`, Action: policy.ActionAllow}}, tools)
	require.EqualError(t, err, `rule "notbool": when is int, not a bool, for tool refund`)

	set, err := policy.Compile([]policy.Rule{{Name: "gone", Tools: []string{"delete_db"}, Action: policy.ActionDeny, Reason: "no"}}, tools)
	require.NoError(t, err)
	require.Equal(t, []string{`rule "gone" names tool "delete_db", which this worker does not offer`}, set.Skipped)

	_, err = policy.Compile([]policy.Rule{{Name: "quiet", Action: policy.ActionDeny}}, tools)
	require.ErrorContains(t, err, `rule "quiet" denies without a reason`)

	_, err = policy.Compile([]policy.Rule{{Name: "q", Action: policy.ActionAllow, Quorum: 2}}, tools)
	require.ErrorContains(t, err, `only go with require_approval`)
}

func TestLoadYAMLAndJSON(t *testing.T) {
	dir := t.TempDir()
	yml := filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(yml, []byte(`rules:
  - name: big_refund
    tools: [refund]
    when: args.amount > 500
    action: require_approval
    group: leads
    quorum: 2
    escalate: {after: 30m, group: managers}
`), 0o600))
	rules, err := policy.Load(yml)
	require.NoError(t, err)
	require.Equal(t, []policy.Rule{{Name: "big_refund", Tools: []string{"refund"}, When: "args.amount > 500", Action: policy.ActionRequireApproval, Group: "leads", Quorum: 2, Escalate: &policy.Escalate{After: policy.Duration(30 * time.Minute), Group: "managers"}}}, rules)

	js := filepath.Join(dir, "policy.json")
	require.NoError(t, os.WriteFile(js, []byte(`{"rules":[{"name":"a","action":"allow","whenn":"true"}]}`), 0o600))
	_, err = policy.Load(js)
	require.ErrorContains(t, err, `unknown field "whenn"`)

	require.NoError(t, os.WriteFile(yml, []byte("rules:\n  - name: a\n    action: allow\n    escalate: {after: soon}\n"), 0o600))
	_, err = policy.Load(yml)
	require.ErrorContains(t, err, `"soon" is not a duration`)
}

func TestAnExampleFileCompiles(t *testing.T) {
	rules, err := policy.Load("../examples/policy.yaml")
	require.NoError(t, err)
	// The refunds stand-in MCP server offers issue_refund with the same
	// arguments as refunds.issue_refund; large_refund names both.
	mcpIssue := issue
	mcpIssue.Name = "refunds.issue_refund"
	set, err := policy.Compile(rules, []policy.Tool{writeFile, issue, mcpIssue})
	require.NoError(t, err)
	require.Empty(t, set.Skipped)
	require.Equal(t, policy.ActionAllow, set.Decide(policy.Call{Tool: "write_file", Args: json.RawMessage(`{"path":"drafts/x.md","content":""}`)}).Action)
	// Elsewhere no rule matches, so write_file's own default (always) asks.
	require.Equal(t, policy.Decision{}, set.Decide(policy.Call{Tool: "write_file", Args: json.RawMessage(`{"path":"main.go","content":""}`)}))
	// A path that only starts in drafts/ is not a draft: the model could
	// write anywhere in the workspace unasked through drafts/../.
	for _, p := range []string{"drafts/../main.go", "drafts/x/../../main.go"} {
		require.Equal(t, policy.Decision{}, set.Decide(policy.Call{Tool: "write_file", Args: json.RawMessage(`{"path":"` + p + `","content":""}`)}), p)
	}
	require.Equal(t, policy.ActionDeny, set.Decide(policy.Call{Tool: "write_file", Args: json.RawMessage(`{"path":"drafts/.env","content":""}`)}).Action)
	require.Equal(t, policy.Decision{}, set.Decide(policy.Call{Tool: "issue_refund", Args: json.RawMessage(`{"order_id":"1001","amount_cents":4999}`)}))
	for _, tool := range []string{"issue_refund", "refunds.issue_refund"} {
		d := set.Decide(policy.Call{Tool: tool, Args: json.RawMessage(`{"order_id":"1001","amount_cents":150000}`)})
		require.Equal(t, "large_refund", d.Rule, tool)
		require.Equal(t, 2, d.Quorum, tool)
		require.Equal(t, "leads", d.Group, tool)
	}
	require.Equal(t, policy.Decision{}, set.Decide(policy.Call{Tool: "refunds.issue_refund", Args: json.RawMessage(`{"order_id":"1001","amount_cents":4999}`)}))
}

// BenchmarkDecide100Rules is one call's decision with 100 rules that apply
// to its tool, typical arguments, and the matching rule near the end.
func BenchmarkDecide100Rules(b *testing.B) {
	var rules []policy.Rule
	for i := range 99 {
		when := fmt.Sprintf(`args.amount > %d && args.order.startsWith("x%d") || turn.user == "u%d"`, 1000+i, i, i)
		if i%10 == 0 {
			// One rule in ten walks the call's lines.
			when = fmt.Sprintf(`args.lines.exists(l, l.sku == "s%d" && l.qty > 100)`, i)
		}
		rules = append(rules, policy.Rule{Name: fmt.Sprintf("r%d", i), Tools: []string{"refund"}, When: when, Action: policy.ActionRequireApproval})
	}
	rules = append(rules, policy.Rule{Name: "small", Tools: []string{"refund"}, When: `args.amount <= 100 && turn.user != ""`, Action: policy.ActionAllow})
	set, err := policy.Compile(rules, tools)
	if err != nil {
		b.Fatal(err)
	}
	call := policy.Call{Tool: "refund", User: "alice", Step: 3, Args: json.RawMessage(`{"order":"o-1234","amount":42,"lines":[{"sku":"a1","qty":1},{"sku":"b2","qty":2}]}`)}
	if d := set.Decide(call); d.Rule != "small" {
		b.Fatalf("decision %+v", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		set.Decide(call)
	}
}

func TestRulesReadTheTurnsAgentAndMetadata(t *testing.T) {
	set, err := policy.Compile([]policy.Rule{
		{Name: "support_drafts", Tools: []string{"write_file"}, When: `turn.agent == "support" && turn.metadata["team"] == "emea"`, Action: policy.ActionAllow},
		{Name: "prod", Tools: []string{"write_file"}, When: `has(turn.metadata.env) && turn.metadata.env == "prod"`, Action: policy.ActionDeny, Reason: "no writes from production turns"},
	}, tools)
	require.NoError(t, err)

	call := func(agent string, md map[string]string) policy.Decision {
		return set.Decide(policy.Call{Tool: "write_file", Args: json.RawMessage(`{"path":"a.md","content":"x"}`), Agent: agent, Metadata: md})
	}
	require.Equal(t, "support_drafts", call("support", map[string]string{"team": "emea"}).Rule)
	require.Equal(t, policy.Decision{}, call("support", map[string]string{"team": "apac"}))
	require.Equal(t, policy.Decision{}, call("sales", map[string]string{"team": "emea"}))
	require.Equal(t, policy.ActionDeny, call("support", map[string]string{"team": "emea", "env": "prod"}).Action)
	// A key the turn's metadata lacks fails the rule that indexes it
	// without has(): a person decides, nothing runs unasked.
	d := call("support", nil)
	require.Equal(t, policy.ActionRequireApproval, d.Action)
	require.Equal(t, "support_drafts", d.Rule)

	// Checked at start like the other variables: metadata values are
	// strings, and the turn has no other fields.
	_, err = policy.Compile([]policy.Rule{{Name: "typed", Tools: []string{"write_file"}, When: `turn.metadata["n"] > 3`, Action: policy.ActionAllow}}, tools)
	require.ErrorContains(t, err, `rule "typed": when does not compile for tool write_file`)
	_, err = policy.Compile([]policy.Rule{{Name: "agnet", Tools: []string{"write_file"}, When: `turn.agnet == "x"`, Action: policy.ActionAllow}}, tools)
	require.ErrorContains(t, err, `rule "agnet"`)
}
