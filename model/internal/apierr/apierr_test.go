package apierr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		headers map[string]string
		want    time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "30"}, 30 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"milliseconds win", map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{"HTTP date", map[string]string{"Retry-After": now.Add(2 * time.Minute).Format(http.TimeFormat)}, 2 * time.Minute},
		{"HTTP date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"garbage ms falls back", map[string]string{"Retry-After-Ms": "x", "Retry-After": "2"}, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			require.Equal(t, tt.want, RetryAfter(h, now))
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"key my-secret-key here", "key [redacted] here"},
		{"Authorization: Bearer abc.def-ghi", "Authorization: Bearer [redacted]"},
		{"Incorrect API key provided: sk-proj-abcdefghijklmnop1234.", "Incorrect API key provided: [redacted]."},
		{"sk-short is not a key", "sk-short is not a key"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Redact(tt.in, "my-secret-key", ""))
	}
}

func TestDescribe(t *testing.T) {
	tests := map[string]string{
		`{"error":{"message":"bad thing","type":"invalid_request_error"}}`:            "bad thing (invalid_request_error)",
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`: "Overloaded (overloaded_error)",
		`{"error":"model not found"}`:                                                 "model not found",
		`{"object":"error","message":"too long","type":"BadRequestError","code":400}`: "too long",
		`{"detail":"Not Found"}`:                                                      "Not Found",
		`{"detail":[{"loc":["body","model"],"msg":"field required"}]}`:                `[{"loc":["body","model"],"msg":"field required"}]`,
		"upstream connect error\n  or disconnect":                                     "upstream connect error or disconnect",
		"": "",
	}
	for in, want := range tests {
		require.Equal(t, want, Describe([]byte(in)), in)
	}
}

func TestClassify(t *testing.T) {
	c := Classifier{Provider: "p", KeyVar: "P_KEY", Secrets: []string{"s3cr3t"}}
	withStatus := func(status int, body string) *Capture {
		return &Capture{status: status, header: http.Header{}, body: []byte(body)}
	}
	tests := []struct {
		name      string
		err       error
		capture   *Capture
		retryable bool
		contains  string
	}{
		{"already classified passes through", &model.Error{Message: "as is"}, &Capture{}, false, "as is"},
		{"deadline", fmt.Errorf("post: %w", context.DeadlineExceeded), &Capture{}, true, "timed out"},
		{"transport", errors.New("x"), &Capture{transport: errors.New("connection reset by peer s3cr3t")}, true, "connection reset by peer [redacted]"},
		{"decode failure after 200", errors.New("unexpected end of JSON input"), withStatus(200, ""), true, "could not decode"},
		{"refused before sending", errors.New("streaming is required"), &Capture{}, false, "request not sent: streaming is required"},
		{"409 is not retried", errors.New("x"), withStatus(409, `{"error":{"message":"conflict"}}`), false, "request rejected: conflict"},
		{"401 names the variable", errors.New("x"), withStatus(401, `{"error":{"message":"bad key s3cr3t"}}`), false, "authentication failed; check P_KEY: bad key [redacted]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Classify(tt.err, tt.capture)
			var me *model.Error
			require.ErrorAs(t, err, &me)
			require.Equal(t, tt.retryable, me.Retryable)
			require.Contains(t, me.Message, tt.contains)
			require.NotContains(t, err.Error(), "s3cr3t")
		})
	}
	require.NoError(t, c.Classify(nil, &Capture{}))
}

func TestContextLength(t *testing.T) {
	c := Classifier{Provider: "p", KeyVar: "P_KEY"}
	bodies := map[string]string{
		"openai":    `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
		"anthropic": `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`,
		"gemini":    `{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`,
		"bedrock":   `{"message":"Input is too long for requested model."}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			err := c.Classify(errors.New("x"), &Capture{status: 400, header: http.Header{}, body: []byte(body)})
			var me *model.Error
			require.ErrorAs(t, err, &me)
			require.True(t, me.ContextLength)
			require.False(t, me.Retryable)
			require.ErrorIs(t, err, model.ErrContextLength)
			require.Contains(t, me.Message, "context window")
		})
	}
	// A rate limit that talks about tokens is still a rate limit.
	err := c.Classify(errors.New("x"), &Capture{status: 429, header: http.Header{}, body: []byte(`{"message":"Too many tokens, please wait before trying again."}`)})
	require.NotErrorIs(t, err, model.ErrContextLength)
	err = c.Classify(errors.New("x"), &Capture{status: 400, header: http.Header{}, body: []byte(`{"error":{"message":"messages: field required"}}`)})
	require.NotErrorIs(t, err, model.ErrContextLength)
}

func TestWrapClientCapturesPerContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "4")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"slow down"}}`)
	}))
	defer srv.Close()
	hc := WrapClient(srv.Client())
	capture := &Capture{}
	req, err := http.NewRequestWithContext(WithCapture(context.Background(), capture), http.MethodPost, srv.URL, nil)
	require.NoError(t, err)
	res, err := hc.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.JSONEq(t, `{"error":{"message":"slow down"}}`, string(body), "the caller still reads the body")
	cerr := Classifier{Provider: "p"}.Classify(errors.New("sdk error"), capture)
	var me *model.Error
	require.ErrorAs(t, cerr, &me)
	require.True(t, me.Retryable)
	require.Equal(t, 4*time.Second, me.RetryAfter)
	require.Contains(t, me.Message, "slow down")

	// A request without a capture goes through untouched.
	res, err = hc.Get(srv.URL)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
}

func TestRedactCloudKeys(t *testing.T) {
	require.Equal(t, "key [redacted] bad", Redact("key AIzaSyA1234567890abcdefghijklmnopqrstuv bad"))
	require.Equal(t, "id [redacted].", Redact("id AKIAIOSFODNN7EXAMPLE."))
}

func TestGoogleRetryInfo(t *testing.T) {
	body := `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"19s"}]}}`
	err := Classifier{Provider: "gemini"}.Classify(errors.New("x"), &Capture{status: 429, header: http.Header{}, body: []byte(body)})
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.True(t, me.Retryable)
	require.Equal(t, 19*time.Second, me.RetryAfter)
	// A header wins over the body.
	err = Classifier{Provider: "gemini"}.Classify(errors.New("x"), &Capture{status: 429, header: http.Header{"Retry-After": {"2"}}, body: []byte(body)})
	require.ErrorAs(t, err, &me)
	require.Equal(t, 2*time.Second, me.RetryAfter)
}
