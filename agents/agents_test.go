package agents

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/workflows"
)

func TestParseReadsYAMLAndJSON(t *testing.T) {
	yamlFile := `
agents:
  - name: triage
    description: Routes requests.
    instructions: You route.
    model: scripted:triage
    handoffs: [billing]
  - name: billing
    model: scripted:billing
    tools: [refund, "agent:researcher"]
    policy:
      approval: {refund: always}
      response_timeout: 2h
  - name: researcher
    model: scripted:researcher
`
	got, err := Parse([]byte(yamlFile))
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []string{"billing"}, got[0].Handoffs)
	require.Equal(t, []string{"refund", "agent:researcher"}, got[1].Tools)
	require.Equal(t, workflows.Duration(2*time.Hour), got[1].Policy.ResponseTimeout)
	require.Equal(t, "always", got[1].Policy.Approval["refund"])

	j, err := Parse([]byte(`{"agents": [{"name": "solo", "model": "scripted:x"}]}`))
	require.NoError(t, err)
	require.Equal(t, "solo", j[0].Name)
}

func TestParseNamesTheBadField(t *testing.T) {
	for file, want := range map[string]string{
		`agents: [{name: billing, model: x:y, tools: [a, b, "agent:nobody"]}]`: `agents file: agent "billing": tools[2] "agent:nobody" names no agent`,
		`agents: [{name: billing, model: x:y, tool: [a]}]`:                     `agents file: json: unknown field "tool"`,
		`agents: [{name: billing}]`:                                            `agents file: agent "billing": model is empty; name one such as scripted:demo or openai:gpt-4.1`,
		`agents: [{name: a, model: x:y, handoffs: [b]}]`:                       `agents file: agent "a": handoffs[0] "b" names no agent`,
		`agents: []`: `agents file: the agents list is empty`,
		`agents: [{name: a, model: x:y, policy: {response_timeout: soon}}]`: `agents file: "soon" is not a duration such as 90m, 24h or 7d`,
	} {
		_, err := Parse([]byte(file))
		require.EqualError(t, err, want, file)
	}
}

func TestLoadSaysWhichFileIsMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, "agents file:")
}
