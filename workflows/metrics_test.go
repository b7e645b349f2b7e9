package workflows

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/metrics/metricstest"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/transcript"
	"github.com/tollgate-dev/tollgate/tool"
)

// newMetricsHarness is newHarness with the SDK's metrics going to rec.
func newMetricsHarness(t *testing.T, rec *metricstest.Recorder, replies ...results.Message) *harness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	suite.SetMetricsHandler(rec)
	env := suite.NewTestWorkflowEnvironment()
	h := &harness{env: env, model: &fakeModel{replies: replies}, log: &toolLog{}, connected: &sync.Map{}}
	reg, err := tool.NewRegistry(testTools(t, h.log, h.connected)...)
	require.NoError(t, err)
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	env.RegisterWorkflowWithOptions(AgentTurn, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivity(&activities.Activities{Tools: reg, Models: h.model, Transcripts: store, Workspace: t.TempDir()})
	return h
}

func TestTurnMetricsCountEndsCallsWaitsAndDecisions(t *testing.T) {
	rec := metricstest.New()
	h := newMetricsHarness(t, rec,
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`), tc("e1", "echo", `{"text":"hi"}`), tc("x1", "no_such_tool", `{}`)),
		calls("", tc("a1", "ask", `{"prompt":"tone?"}`)),
		results.AssistantText("done"))
	h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionApprove, By: "alice"}, nil)
	h.respond(10*time.Minute, Response{CallID: "a1", Decision: results.DecisionAnswer, Answer: []byte(`"formal"`), By: "bob"}, nil)
	res := h.run(t, Input{Prompt: "go", Tools: []string{"write", "echo", "ask"}})
	require.Equal(t, StatusCompleted, res.Status)

	require.Equal(t, map[string]int64{"tollgate_turns{status=completed}": 1}, rec.Counters(metrics.Turns, metrics.Status))
	require.Equal(t, map[string]int64{
		"tollgate_tool_calls{outcome=success,tool=write}":      1,
		"tollgate_tool_calls{outcome=success,tool=echo}":       1,
		"tollgate_tool_calls{outcome=success,tool=ask}":        1,
		"tollgate_tool_calls{outcome=tool_error,tool=unknown}": 1,
	}, rec.Counters(metrics.ToolCalls, metrics.Tool, metrics.Outcome))
	require.Equal(t, map[string]int64{
		"tollgate_decisions{decision=approve}": 1,
		"tollgate_decisions{decision=answer}":  1,
	}, rec.Counters(metrics.Decisions, metrics.Decision))

	waits := rec.Timers(metrics.Wait, metrics.WaitKind)
	require.Len(t, waits, 2)
	require.Len(t, waits["tollgate_wait{kind=pending_approval}"], 1)
	require.Len(t, waits["tollgate_wait{kind=waiting_answer}"], 1)
	// Workflow time: the responses came 2 minutes after the turn started
	// and 10 minutes after, less the first wait.
	require.InDelta(t, 2*time.Minute, waits["tollgate_wait{kind=pending_approval}"][0], float64(5*time.Second))
	require.InDelta(t, 8*time.Minute, waits["tollgate_wait{kind=waiting_answer}"][0], float64(5*time.Second))
}

func TestTimeoutsAndDenialsAreDecisionsToo(t *testing.T) {
	rec := metricstest.New()
	h := newMetricsHarness(t, rec,
		calls("", tc("w1", "write", `{"path":"a.md","content":"x"}`), tc("w2", "write", `{"path":"b.md","content":"y"}`)),
		results.AssistantText("ok"))
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionDeny, Reason: "no", By: "alice"}, nil)
	res := h.run(t, Input{Prompt: "go", Tools: []string{"write"}, Policy: Policy{ResponseTimeout: Duration(time.Hour)}})
	require.Equal(t, StatusCompleted, res.Status)

	require.Equal(t, map[string]int64{
		"tollgate_decisions{decision=deny}":    1,
		"tollgate_decisions{decision=timeout}": 1,
	}, rec.Counters(metrics.Decisions, metrics.Decision))
	require.Equal(t, map[string]int64{"tollgate_tool_calls{outcome=refused,tool=write}": 2}, rec.Counters(metrics.ToolCalls, metrics.Tool, metrics.Outcome))
}

// A hostile model naming a fresh tool on every call must not make a
// series per name: every name the worker did not register is one label.
func TestInventedToolNamesShareOneLabel(t *testing.T) {
	var invented []results.ToolCall
	for i := range 40 {
		invented = append(invented, tc(fmt.Sprint("c", i), fmt.Sprintf("tool_%d_%x", i, i*7919), `{}`))
	}
	invented = append(invented, tc("e", "echo", `{"text":"real"}`))
	rec := metricstest.New()
	h := newMetricsHarness(t, rec, calls("", invented...), results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "go", Tools: []string{"echo"}, Policy: Policy{MaxCallsPerStep: 64}})
	require.Equal(t, StatusCompleted, res.Status)

	require.Equal(t, []string{"echo", metrics.UnknownTool}, rec.LabelValues(metrics.ToolCalls, metrics.Tool))
	require.Equal(t, int64(40), rec.Counters(metrics.ToolCalls, metrics.Tool)["tollgate_tool_calls{tool=unknown}"])
}

func TestClosedLabelSetsMapStrangersToOther(t *testing.T) {
	require.Equal(t, "completed", statusLabel(StatusCompleted))
	require.Equal(t, metrics.Other, statusLabel(Status("pwned")))
	require.Equal(t, "connected", decisionLabel(results.DecisionConnected))
	require.Equal(t, metrics.Other, decisionLabel(results.DecisionKind("approve\nx")))
	require.Equal(t, "waiting_connection", waitLabel(results.StateWaitingConnection))
	require.Equal(t, metrics.Other, waitLabel(results.StateRunning))

	require.Equal(t, "transfer", outcomeLabel(results.Card{State: results.StateSucceeded, Transfer: &results.Transfer{Target: "b"}}))
	require.Equal(t, "outcome_unknown", outcomeLabel(results.Card{State: results.StateFailed, Failure: &results.Failure{Reason: results.FailureOutcomeUnknown}}))
	require.Equal(t, metrics.Other, outcomeLabel(results.Card{State: results.StateFailed, Failure: &results.Failure{Reason: "weird"}}))
	require.Equal(t, metrics.Other, outcomeLabel(results.Card{State: results.StateRunning}))
}
