package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/workflows"
)

func TestExplainUpdateSortsRejections(t *testing.T) {
	tt := &temporalTurns{address: "10.0.0.9:7233", namespace: "ns"}
	ctx := context.Background()

	// tollgate.Client sorts the refusals (TestAsRejectionSortsRefusals);
	// the starter keeps their sentence.
	err := tt.explainUpdate(ctx, ctx, &tollgate.RejectedError{Reason: "call c1 is running, not waiting for a response", Type: workflows.ErrTypeNotWaiting}, "T")
	var rejected *rejectedError
	require.ErrorAs(t, err, &rejected)
	assert.Equal(t, "call c1 is running, not waiting for a response", rejected.msg)

	err = tt.explainUpdate(ctx, ctx, fmt.Errorf("respond to turn T: %w", serviceerror.NewNotFound("workflow not found for ID: T")), "T")
	assert.False(t, errors.As(err, &rejected))
	assert.ErrorContains(t, err, "no turn T in namespace ns at 10.0.0.9:7233")

	expired, cancel := context.WithCancel(ctx)
	cancel()
	err = tt.explainUpdate(ctx, expired, fmt.Errorf("wrapped: %w", context.DeadlineExceeded), "T")
	assert.ErrorContains(t, err, "no worker accepted the respond update for T")
}

func TestExplain(t *testing.T) {
	tt := &temporalTurns{address: "10.0.0.9:7233", namespace: "ns"}
	err := tt.explain(status.Error(codes.Unavailable, "connection refused"), "T", "query the state")
	assert.ErrorContains(t, err, "cannot reach Temporal at 10.0.0.9:7233 to query the state")
	err = tt.explain(serviceerror.NewNotFound("workflow execution already completed"), "T", "cancel the turn")
	assert.ErrorContains(t, err, "cannot cancel the turn: the turn T has already ended")
	err = tt.explain(context.Canceled, "T", "wait for the result")
	assert.ErrorIs(t, err, errInterrupted)
	inner := errors.New("boom")
	err = tt.explain(inner, "T", "export the history")
	assert.ErrorIs(t, err, inner)
	assert.ErrorContains(t, err, "export the history T: boom")
	assert.NoError(t, tt.explain(nil, "T", "x"))
}

func TestFailureMessage(t *testing.T) {
	assert.Equal(t, "invalid turn input: no model", failureMessage(fmt.Errorf("workflow failed: %w",
		temporal.NewNonRetryableApplicationError("invalid turn input: no model", "InvalidTurnInput", nil))))
	assert.Equal(t, "cancelled", failureMessage(temporal.NewCanceledError()))
	assert.Equal(t, "plain", failureMessage(errors.New("plain")))
}
