package workflows

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/activities"
)

// modelInputs records the input of every CallModel the turn starts.
func (h *harness) modelInputs(t *testing.T) *[]activities.CallModelInput {
	var ins []activities.CallModelInput
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		if info.ActivityType.Name != activities.CallModelName {
			return
		}
		var in activities.CallModelInput
		require.NoError(t, args.Get(&in))
		ins = append(ins, in)
	})
	return &ins
}

// The tool definitions travel with the turn's first model call alone: it
// stores them, and the later calls name them. The model is offered the
// same tools every time.
func TestToolDefinitionsTravelOnce(t *testing.T) {
	h := newHarness(t, echoSteps(3, "hi")...)
	ins := h.modelInputs(t)
	res := h.run(t, Input{Prompt: "go", Tools: []string{"echo"}})

	require.Equal(t, StatusCompleted, res.Status)
	require.Len(t, *ins, 4)
	first := (*ins)[0]
	require.True(t, first.StoreTools)
	require.Len(t, first.Tools, 1)
	require.Empty(t, first.ToolsRef)
	for i, in := range (*ins)[1:] {
		require.Empty(t, in.Tools, "call %d", i+2)
		require.False(t, in.StoreTools, "call %d", i+2)
		require.NotEmpty(t, in.ToolsRef, "call %d", i+2)
	}
	require.Len(t, h.model.requests, 4)
	for i, req := range h.model.requests {
		require.Equal(t, first.Tools, req.Tools, "request %d", i+1)
	}
}

// A turn without tools has nothing to store.
func TestTurnWithoutToolsStoresNoDefinitions(t *testing.T) {
	h := newHarness(t, echoSteps(0, "")...)
	ins := h.modelInputs(t)
	res := h.run(t, Input{Prompt: "go"})

	require.Equal(t, StatusCompleted, res.Status)
	require.Len(t, *ins, 1)
	require.False(t, (*ins)[0].StoreTools)
	require.Empty(t, (*ins)[0].Tools)
}

// When the stored definitions a call names are gone, the turn sends them
// whole again, which stores them anew, and goes on naming them.
func TestMissingToolDefinitionsAreSentAgain(t *testing.T) {
	h := newHarness(t, echoSteps(3, "hi")...)
	acts := &activities.Activities{Tools: h.reg, Models: h.model, Transcripts: h.store, Workspace: t.TempDir()}
	var ins []activities.CallModelInput
	lost := false
	h.env.OnActivity(activities.CallModelName, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.CallModelInput) (activities.CallModelResult, error) {
			ins = append(ins, in)
			if in.ToolsRef != "" && !lost {
				lost = true
				return activities.CallModelResult{}, temporal.NewNonRetryableApplicationError("tool definitions gone", activities.ErrTypeToolsMissing, nil)
			}
			return acts.CallModel(ctx, in)
		})
	res := h.run(t, Input{Prompt: "go", Tools: []string{"echo"}})

	require.Equal(t, StatusCompleted, res.Status)
	require.Len(t, ins, 5, "four calls, the second twice")
	require.NotEmpty(t, ins[1].ToolsRef)
	require.True(t, ins[2].StoreTools, "the retry sends the definitions whole")
	require.Len(t, ins[2].Tools, 1)
	require.Empty(t, ins[2].ToolsRef)
	require.NotEmpty(t, ins[3].ToolsRef, "and the calls after it name them again")
	require.NotEmpty(t, ins[4].ToolsRef)
	require.Len(t, h.model.requests, 4, "the model was asked once per step")
	for i, req := range h.model.requests {
		require.Len(t, req.Tools, 1, "request %d", i+1)
	}
}
