package activities

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

// A call asked to store its tool definitions returns their reference; a
// later call that sends the reference alone offers the model the same
// tools.
func TestCallModelStoresToolsAndLoadsThemByReference(t *testing.T) {
	p := &fakeProvider{reply: countingReply}
	acts := newModelActivities(t, p)
	tools := []model.ToolDef{{Name: "echo", Description: "Echoes.", Schema: json.RawMessage(`{"type":"object"}`)}}
	go1 := []results.Message{results.UserText("go")}

	res, err := callModel(t, acts, CallModelInput{Model: "fake:m", Messages: go1, Tools: tools})
	require.NoError(t, err)
	require.Empty(t, res.ToolsRef, "not asked to store them")

	res, err = callModel(t, acts, CallModelInput{Model: "fake:m", Messages: go1, Tools: tools, StoreTools: true})
	require.NoError(t, err)
	require.NotEmpty(t, res.ToolsRef)

	again, err := callModel(t, acts, CallModelInput{Model: "fake:m", Messages: go1, ToolsRef: res.ToolsRef})
	require.NoError(t, err)
	require.Empty(t, again.ToolsRef)
	calls := p.calls()
	require.Len(t, calls, 3)
	require.Equal(t, tools, calls[2].Tools)
}

// A reference that names nothing stored fails at once, as ToolsMissing,
// before the model is called: the workflow sends the definitions again.
func TestCallModelWithAMissingToolsReference(t *testing.T) {
	for _, ref := range []string{
		"0000000000000000000000000000000000000000000000000000000000000000",
		"../../outside",
	} {
		p := &fakeProvider{reply: countingReply}
		acts := newModelActivities(t, p)
		_, err := callModel(t, acts, CallModelInput{Model: "fake:m", Messages: []results.Message{results.UserText("go")}, ToolsRef: ref})
		e := appError(t, err)
		require.Equal(t, ErrTypeToolsMissing, e.Type(), ref)
		require.True(t, e.NonRetryable(), ref)
		require.Empty(t, p.calls(), "the model was not called")
	}
}
