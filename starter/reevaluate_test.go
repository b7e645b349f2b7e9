package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

func TestReevaluatePrintsEachCallsOutcome(t *testing.T) {
	fake := newFake(workflows.State{})
	fake.reevaluation = workflows.Reevaluation{Calls: []workflows.Reevaluated{
		{CallID: "w1", Tool: "write_file", Outcome: workflows.ReevaluatedReleased, Was: "default", Now: "drafts/allow",
			Card: results.Card{CallID: "w1", Tool: "write_file", State: results.StateRunning}},
		{CallID: "r1", Tool: "issue_refund", Outcome: workflows.ReevaluatedChanged, Was: "big/require_approval", Now: "large_refund/require_approval", Dropped: []string{"bob"},
			Card: results.Card{CallID: "r1", Tool: "issue_refund", State: results.StatePendingApproval}},
	}}
	h := newHarness(t, fake)
	o := h.run("", "reevaluate", "turn-1", "--by", "olga")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Equal(t, []string{"olga"}, fake.reevaluatedBy)
	assert.Contains(t, o.stdout, "w1 write_file: released (default -> drafts/allow)\n")
	assert.Contains(t, o.stdout, "r1 issue_refund: changed (big/require_approval -> large_refund/require_approval); approvals no longer counted: [bob]\n")

	o = h.run("", "reevaluate")
	assert.NotEqual(t, 0, o.code)
}
