package activities

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

func describe(t *testing.T, acts *Activities, names []string) ([]tool.Spec, error) {
	t.Helper()
	val, err := newEnv(acts).ExecuteActivity(acts.DescribeTools, names)
	if err != nil {
		return nil, err
	}
	var specs []tool.Spec
	require.NoError(t, val.Get(&specs))
	return specs, nil
}

func TestDescribeTools(t *testing.T) {
	// bare sets nothing WithDefaults would fill.
	bare := returns("bare", results.Succeed(), nil)
	bare.spec.Approval = tool.ApprovalAlways
	bare.spec.Concurrent = true
	// tuned sets everything itself.
	tuned := returns("tuned", results.Succeed(), nil)
	tuned.spec.Schema = json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)
	tuned.spec.Idempotent = true
	tuned.spec.Timeout = 3 * time.Second
	tuned.spec.HeartbeatInterval = time.Second
	tuned.spec.MaxOutputBytes = 100
	tuned.spec.MaxOutputLines = 5
	typed := tool.MustFunc(tool.Spec{Name: "typed", Description: "Typed."}, func(context.Context, tool.Call, copyArgs) (results.Outcome, error) {
		return results.Succeed(), nil
	})
	acts := newActivities(t, typed, tuned, bare)

	cases := []struct {
		name  string
		names []string
		want  []string
	}{
		{"in the order asked", []string{"tuned", "bare", "typed"}, []string{"tuned", "bare", "typed"}},
		{"another order", []string{"typed", "tuned"}, []string{"typed", "tuned"}},
		{"one", []string{"bare"}, []string{"bare"}},
		{"none", []string{}, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			specs, err := describe(t, acts, tc.names)
			require.NoError(t, err)
			got := make([]string, len(specs))
			for i, s := range specs {
				got[i] = s.Name
			}
			require.Equal(t, tc.want, got)
		})
	}

	t.Run("defaults applied", func(t *testing.T) {
		specs, err := describe(t, acts, []string{"bare", "tuned"})
		require.NoError(t, err)
		require.Len(t, specs, 2)

		b := specs[0]
		require.Equal(t, "test tool bare", b.Description)
		require.Equal(t, tool.ApprovalAlways, b.Approval, "a set approval is kept")
		require.True(t, b.Concurrent)
		require.False(t, b.Idempotent)
		require.Equal(t, tool.DefaultTimeout, b.Timeout)
		require.Equal(t, tool.DefaultHeartbeatInterval, b.HeartbeatInterval)
		require.Equal(t, tool.DefaultMaxOutputBytes, b.MaxOutputBytes)
		require.Equal(t, tool.DefaultMaxOutputLines, b.MaxOutputLines)
		require.JSONEq(t, `{"type":"object"}`, string(b.Schema))

		tu := specs[1]
		require.Equal(t, tool.ApprovalNever, tu.Approval)
		require.True(t, tu.Idempotent)
		require.Equal(t, 3*time.Second, tu.Timeout)
		require.Equal(t, time.Second, tu.HeartbeatInterval)
		require.Equal(t, 100, tu.MaxOutputBytes)
		require.Equal(t, 5, tu.MaxOutputLines)
		require.JSONEq(t, string(tuned.spec.Schema), string(tu.Schema))
	})

	t.Run("the spec a turn records is the one RunTool enforces", func(t *testing.T) {
		specs, err := describe(t, acts, []string{"typed"})
		require.NoError(t, err)
		schema, err := tool.CompileSchema(specs[0].Schema)
		require.NoError(t, err)
		require.Error(t, schema.Validate(json.RawMessage(`{"count":1}`)))
		require.NoError(t, schema.Validate(json.RawMessage(`{"path":"a"}`)))
	})

	unknown := []struct {
		name    string
		names   []string
		wantMsg []string
	}{
		{"one unknown", []string{"bare", "nope"}, []string{"unknown tool(s) nope;", "this worker offers: bare, tuned, typed"}},
		{"several unknown, sorted", []string{"zeta", "bare", "alpha"}, []string{"unknown tool(s) alpha, zeta;"}},
		{"only unknown", []string{"ghost"}, []string{"unknown tool(s) ghost;"}},
	}
	for _, tc := range unknown {
		t.Run(tc.name, func(t *testing.T) {
			specs, err := describe(t, acts, tc.names)
			require.Nil(t, specs)
			appErr := appError(t, err)
			require.Equal(t, ErrTypeUnknownTool, appErr.Type())
			require.True(t, appErr.NonRetryable(), "a missing tool does not appear on retry")
			for _, w := range tc.wantMsg {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestActivityNames(t *testing.T) {
	// The workflow schedules activities by these names; they must be the
	// ones RegisterActivity derives from the method names.
	acts := newActivities(t)
	acts.Models = fakeResolver{err: errors.New("no models here")}
	env := newEnv(acts)

	val, err := env.ExecuteActivity(RunToolName, RunToolInput{TurnID: "t", CallID: "c", Tool: "nope"})
	require.NoError(t, err)
	var out results.Outcome
	require.NoError(t, val.Get(&out))
	require.Equal(t, results.KindToolError, out.Kind)

	val, err = env.ExecuteActivity(DescribeToolsName, []string{})
	require.NoError(t, err)
	var specs []tool.Spec
	require.NoError(t, val.Get(&specs))
	require.Empty(t, specs)

	_, err = env.ExecuteActivity(CallModelName, CallModelInput{Model: "fake:m"})
	require.Equal(t, ErrTypeModelRejected, appError(t, err).Type())
}
