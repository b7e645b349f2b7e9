package tollgate

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

type pathArgs struct {
	Path string `json:"path"`
}

func pathTool(name string) tool.Tool {
	return tool.MustFunc(tool.Spec{Name: name, Description: "Takes a path."}, func(context.Context, tool.Call, pathArgs) (results.Outcome, error) {
		return results.SucceedText("ok"), nil
	})
}

type addedLater struct {
	tools []tool.Tool
	fn    func() error
}

func (a *addedLater) Tools() []tool.Tool    { return a.tools }
func (a *addedLater) Watch(fn func() error) { a.fn = fn }

// A tool an MCP server adds after start is held to the rules meant for
// it, and one the rules do not compile for asks a person rather than run.
func TestRulesHoldForAToolAddedAfterStart(t *testing.T) {
	src := &addedLater{}
	reg, err := tool.NewRegistry(pathTool("read_file"))
	require.NoError(t, err)
	require.NoError(t, reg.AddSource(src))
	rules, err := newLiveRules([]policy.Rule{
		{Name: "no_secrets", When: `args.path.startsWith("secrets/")`, Action: policy.ActionDeny, Reason: "secrets stay put"},
		{Name: "no_wipe", Tools: []string{"wipe"}, Action: policy.ActionDeny, Reason: "never wipe"},
	}, reg)
	require.NoError(t, err)
	require.Equal(t, []string{`rule "no_wipe" names tool "wipe", which this worker does not offer`}, rules.start.Skipped)

	// The tool is not there yet: no rule decides, as for an agent's tool.
	require.Equal(t, policy.Decision{}, rules.Decide(policy.Call{Tool: "wipe", Args: []byte(`{"path":"a"}`)}))

	src.tools = []tool.Tool{pathTool("wipe"), pathTool("remote.read")}
	require.NoError(t, src.fn())
	d := rules.Decide(policy.Call{Tool: "wipe", Args: []byte(`{"path":"a"}`)})
	require.Equal(t, policy.ActionDeny, d.Action)
	require.Equal(t, "no_wipe", d.Rule)
	d = rules.Decide(policy.Call{Tool: "remote.read", Args: []byte(`{"path":"secrets/key"}`)})
	require.Equal(t, policy.ActionDeny, d.Action)
	require.Equal(t, "no_secrets", d.Rule)
	require.Equal(t, policy.Decision{}, rules.Decide(policy.Call{Tool: "remote.read", Args: []byte(`{"path":"notes.txt"}`)}))

	// A tool whose schema the rules do not fit (it has no path): a person
	// decides.
	src.tools = []tool.Tool{tool.MustFunc(tool.Spec{Name: "no_path", Description: "Takes no path."}, func(context.Context, tool.Call, struct{}) (results.Outcome, error) {
		return results.SucceedText("ok"), nil
	})}
	require.NoError(t, src.fn())
	d = rules.Decide(policy.Call{Tool: "no_path", Args: []byte(`{}`)})
	require.Equal(t, policy.ActionRequireApproval, d.Action)
	require.Contains(t, d.Reason, "so a person decides")
}
