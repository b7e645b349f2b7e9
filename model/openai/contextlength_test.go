package openai

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
	srv := newServer(t, 400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, nil)
	_, err := srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "gpt-4.1", Messages: []results.Message{results.UserText("hi")}})
	require.ErrorIs(t, err, model.ErrContextLength)
	require.False(t, model.AsError(err).Retryable)

	srv = newServer(t, 429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, map[string]string{"Retry-After": "5"})
	_, err = srv.provider(fakeKey).Complete(context.Background(), model.Request{Model: "gpt-4.1", Messages: []results.Message{results.UserText("hi")}})
	require.NotErrorIs(t, err, model.ErrContextLength)
	require.True(t, model.AsError(err).Retryable)
	require.Equal(t, 5*time.Second, model.AsError(err).RetryAfter)
}
