package activities

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// fakeTool is a tool.Tool whose spec and behaviour a test sets directly.
// Unlike tool.MustFunc it applies no defaults and decodes no arguments.
type fakeTool struct {
	spec tool.Spec
	run  func(ctx context.Context, call tool.Call) (results.Outcome, error)
}

func (f *fakeTool) Spec() tool.Spec { return f.spec }

func (f *fakeTool) Run(ctx context.Context, call tool.Call) (results.Outcome, error) {
	return f.run(ctx, call)
}

// newFake declares a fake tool with a minimal valid spec.
func newFake(name string, run func(ctx context.Context, call tool.Call) (results.Outcome, error)) *fakeTool {
	return &fakeTool{
		spec: tool.Spec{Name: name, Description: "test tool " + name, Approval: tool.ApprovalNever},
		run:  run,
	}
}

// returns is a fake tool that always returns out and err.
func returns(name string, out results.Outcome, err error) *fakeTool {
	return newFake(name, func(context.Context, tool.Call) (results.Outcome, error) { return out, err })
}

// newActivities builds an Activities with tools and a fresh workspace.
func newActivities(t *testing.T, tools ...tool.Tool) *Activities {
	t.Helper()
	reg, err := tool.NewRegistry(tools...)
	require.NoError(t, err)
	return &Activities{Tools: reg, Workspace: t.TempDir()}
}

// newEnv registers acts with a fresh activity test environment. opts, when
// given, sets the worker options (only BackgroundActivityContext matters).
func newEnv(acts *Activities, opts ...worker.Options) *testsuite.TestActivityEnvironment {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetTestTimeout(30 * time.Second)
	if len(opts) > 0 {
		env.SetWorkerOptions(opts[0])
	}
	env.RegisterActivity(acts)
	return env
}

// runTool executes RunTool through the environment, so the outcome also
// survives the data converter (an invalid outcome would not encode).
func runTool(t *testing.T, env *testsuite.TestActivityEnvironment, acts *Activities, in RunToolInput) (results.Outcome, error) {
	t.Helper()
	if in.TurnID == "" {
		in.TurnID = "turn-1"
	}
	if in.CallID == "" {
		in.CallID = "call-1"
	}
	if in.Arguments == nil {
		// What the workflow sends for a call without arguments; a nil
		// RawMessage would arrive as null, which no object schema accepts.
		in.Arguments = json.RawMessage(`{}`)
	}
	val, err := env.ExecuteActivity(acts.RunTool, in)
	if err != nil {
		return results.Outcome{}, err
	}
	var out results.Outcome
	require.NoError(t, val.Get(&out))
	require.NoError(t, out.Validate())
	return out, nil
}

// mustRun is runTool for calls that must produce an outcome.
func mustRun(t *testing.T, acts *Activities, in RunToolInput) results.Outcome {
	t.Helper()
	out, err := runTool(t, newEnv(acts), acts, in)
	require.NoError(t, err)
	return out
}

// appError extracts the application error an activity failed with.
func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "want an application error, got %T: %v", err, err)
	return appErr
}

// renderFailedInternal renders a failed internal_error card for out the way
// the workflow will, and returns everything the model could see of it.
func renderFailedInternal(t *testing.T, out results.Outcome) string {
	t.Helper()
	require.Equal(t, results.KindInternalError, out.Kind)
	card := results.Card{
		CallID:    "call-1",
		Tool:      "some_tool",
		Arguments: json.RawMessage(`{}`),
		State:     results.StateFailed,
		Failure: &results.Failure{
			Reason: results.FailureInternal,
			Ref:    out.Internal.Ref,
			Detail: out.Internal.Detail,
		},
	}
	msg, err := results.Render(card)
	require.NoError(t, err)
	encoded, err := json.Marshal(msg)
	require.NoError(t, err)
	return msg.Text() + "\n" + string(encoded) + "\n" + card.Summary()
}

// runToolRaw runs RunTool inside an activity with arguments that need not
// be valid JSON, which the data converter would refuse to encode as a
// json.RawMessage.
func runToolRaw(t *testing.T, acts *Activities, in RunToolInput, rawArgs string) results.Outcome {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(func(ctx context.Context, in RunToolInput, raw string) (results.Outcome, error) {
		in.Arguments = json.RawMessage(raw)
		return acts.RunTool(ctx, in)
	}, activity.RegisterOptions{Name: "RunToolRaw"})
	in.TurnID, in.CallID = "turn-1", "call-1"
	val, err := env.ExecuteActivity("RunToolRaw", in, rawArgs)
	require.NoError(t, err)
	var out results.Outcome
	require.NoError(t, val.Get(&out))
	return out
}
