package model_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
)

func TestEmitReachesTheContextsStreamOnly(t *testing.T) {
	model.Emit(context.Background(), model.Delta{Kind: model.DeltaText, Text: "nobody listens"})
	require.False(t, model.Streaming(context.Background()))

	var got []model.Delta
	ctx := model.WithStream(context.Background(), func(d model.Delta) { got = append(got, d) })
	require.True(t, model.Streaming(ctx))
	model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: "Hel"})
	model.Emit(ctx, model.Delta{Kind: model.DeltaToolCall, Index: 1, ToolCallID: "c1", ToolName: "read_file"})
	require.Equal(t, []model.Delta{
		{Kind: model.DeltaText, Text: "Hel"},
		{Kind: model.DeltaToolCall, Index: 1, ToolCallID: "c1", ToolName: "read_file"},
	}, got)
}
