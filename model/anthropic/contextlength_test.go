package anthropic

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

// The error mapping every provider shares: a context-length refusal is
// its own typed failure, a 429's Retry-After is the retry delay.
func TestContextLengthAndRetryAfter(t *testing.T) {
	srv := newServer(t, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, nil)
	_, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "claude-sonnet-4-5", Messages: []results.Message{results.UserText("hi")}})
	require.ErrorIs(t, err, model.ErrContextLength)
	require.False(t, model.AsError(err).Retryable)

	srv = newServer(t, 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, map[string]string{"Retry-After": "5"})
	_, err = srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "claude-sonnet-4-5", Messages: []results.Message{results.UserText("hi")}})
	require.NotErrorIs(t, err, model.ErrContextLength)
	require.True(t, model.AsError(err).Retryable)
	require.Equal(t, 5*time.Second, model.AsError(err).RetryAfter)
}
