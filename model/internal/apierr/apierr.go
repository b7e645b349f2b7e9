// Package apierr turns what an SDK call ended with into a *model.Error.
//
// Both official SDKs return their own error types, each shaped differently,
// and an OpenAI-compatible server is free to answer errors in a body the
// SDK cannot decode at all. So instead of trusting the SDK's error, a
// Capture middleware records the last HTTP exchange itself, and Classify
// decides from the status code, the headers and the body. Every message
// passes through Redact so a key echoed back by a server never reaches a
// log or a workflow history.
package apierr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/model"
)

// maxBody bounds what is kept of an error body: enough for any provider's
// error object, small enough to never matter.
const maxBody = 64 << 10

// Capture is an SDK middleware (openai and anthropic share the signature)
// that remembers how the last attempt of one call ended. Use one per call.
type Capture struct {
	mu        sync.Mutex
	status    int
	header    http.Header
	body      []byte
	transport error
}

// Middleware is passed to option.WithMiddleware.
func (c *Capture) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status, c.header, c.body, c.transport = 0, nil, nil, nil
	if err != nil {
		c.transport = err
		return res, err
	}
	c.status = res.StatusCode
	c.header = res.Header.Clone()
	if res.StatusCode >= 400 && res.Body != nil {
		// Read the body here and hand the SDK a replay of it: the SDK
		// reads it again to build its own error, which we then ignore.
		b, readErr := io.ReadAll(io.LimitReader(res.Body, maxBody))
		_ = res.Body.Close()
		c.body = b
		res.Body = io.NopCloser(bytes.NewReader(b))
		if readErr != nil {
			c.transport = readErr
		}
	}
	return res, nil
}

func (c *Capture) snapshot() (status int, header http.Header, body []byte, transport error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status, c.header, c.body, c.transport
}

// Classifier names the provider in messages and knows the secrets to
// scrub from them.
type Classifier struct {
	// Provider is "openai" or "anthropic": the first word of every message.
	Provider string
	// KeyVar is the environment variable a 401 message points at.
	KeyVar string
	// Secrets are removed from every message (the API key).
	Secrets []string
	// Now is the clock for Retry-After dates; nil means time.Now.
	Now func() time.Time
}

// Classify returns err as a *model.Error, or nil for a nil err.
func (c Classifier) Classify(err error, capture *Capture) error {
	if err == nil {
		return nil
	}
	var me *model.Error
	if errors.As(err, &me) {
		return me
	}
	status, header, body, transport := capture.snapshot()
	switch {
	case status >= 400:
		return c.fromStatus(status, header, body)
	case errors.Is(err, context.DeadlineExceeded):
		return &model.Error{Retryable: true, Message: c.Provider + ": request timed out"}
	case errors.Is(err, context.Canceled):
		return &model.Error{Retryable: true, Message: c.Provider + ": request cancelled"}
	case transport != nil:
		// Connection refused, reset, DNS, TLS, a body cut off: the next
		// attempt may well get through. The URL is left out on purpose:
		// a base URL may carry credentials in its query.
		return &model.Error{Retryable: true, Message: c.redact(fmt.Sprintf("%s: could not reach the server: %s", c.Provider, withoutURL(transport)))}
	case status >= 200 && status < 300:
		// A success status with a body the SDK could not decode: most
		// often a proxy or a stream cut short, so worth another try.
		return &model.Error{Retryable: true, Status: status, Message: c.redact(fmt.Sprintf("%s: could not decode the response: %s", c.Provider, err))}
	default:
		// Nothing was sent: the SDK refused the request itself (an
		// invalid option, a parameter it will not send). Sending it again
		// cannot help.
		return &model.Error{Message: c.redact(fmt.Sprintf("%s: request not sent: %s", c.Provider, err))}
	}
}

func (c Classifier) fromStatus(status int, header http.Header, body []byte) *model.Error {
	detail := c.redact(Describe(body))
	what, retry := "", false
	switch {
	case status == http.StatusTooManyRequests:
		what, retry = "rate limited", true
	case status == http.StatusRequestTimeout:
		what, retry = "request timed out", true
	case status >= 500:
		what, retry = "server error", true
	case status == http.StatusUnauthorized:
		what = "authentication failed; check " + c.KeyVar
	case status == http.StatusForbidden:
		what = "permission denied; the key in " + c.KeyVar + " may not have access to this model"
	case status == http.StatusNotFound:
		what = "not found; check the model name and the base URL"
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		what = "bad request"
		if ContextLength(body) {
			what = "the conversation is longer than the model's context window"
		}
	default:
		what = "request rejected"
	}
	msg := c.Provider + ": " + what
	if detail != "" {
		msg += ": " + detail
	}
	e := &model.Error{Retryable: retry, Status: status, Message: msg}
	e.ContextLength = !retry && strings.HasPrefix(what, "the conversation is longer")
	if retry {
		e.RetryAfter = RetryAfter(header, c.now())
		if e.RetryAfter == 0 {
			e.RetryAfter = retryInfo(body)
		}
	}
	return e
}

// retryInfo reads the google.rpc.RetryInfo detail that Google APIs
// (Gemini, Vertex AI) send with a 429 instead of a Retry-After header.
func retryInfo(body []byte) time.Duration {
	var v struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return 0
	}
	for _, d := range v.Error.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			if delay, err := time.ParseDuration(d.RetryDelay); err == nil && delay > 0 {
				return delay
			}
		}
	}
	return 0
}

func (c Classifier) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c Classifier) redact(s string) string { return Redact(s, c.Secrets...) }

// RetryAfter reads retry-after-ms (OpenAI), then Retry-After as seconds or
// as an HTTP date. It returns 0 when there is none or it is in the past.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// contextLengthMarkers are how providers say a request does not fit the
// context window: OpenAI's error code and message (also vLLM's),
// Anthropic's, Gemini's, Bedrock's, llama.cpp's and Ollama's.
var contextLengthMarkers = []string{
	"context_length_exceeded",
	"maximum context length",
	"prompt is too long",
	"input token count",
	"input is too long",
	"exceeds the context window",
	"context window exceeded",
	"exceeds the available context size",
	"exceeds the context length",
	"too many tokens",
}

// ContextLength reports whether an error body (or message) says the
// conversation is longer than the model's context window.
func ContextLength(body []byte) bool {
	s := strings.ToLower(string(body))
	for _, m := range contextLengthMarkers {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

type captureKey struct{}

// WithCapture returns a context whose HTTP exchanges, made through a
// client from WrapClient, are recorded in c. It is how SDKs that take an
// *http.Client but have no per-request middleware (genai, the AWS SDK,
// Ollama's client) get the same classification as the others.
func WithCapture(ctx context.Context, c *Capture) context.Context {
	return context.WithValue(ctx, captureKey{}, c)
}

// WrapClient returns a copy of hc (nil means a default client) whose
// transport records into the Capture of each request's context.
func WrapClient(hc *http.Client) *http.Client {
	out := &http.Client{}
	if hc != nil {
		*out = *hc
	}
	out.Transport = captureTransport{base: out.Transport}
	return out
}

type captureTransport struct{ base http.RoundTripper }

func (t captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	c, _ := req.Context().Value(captureKey{}).(*Capture)
	if c == nil {
		return base.RoundTrip(req)
	}
	return c.Middleware(req, base.RoundTrip)
}

var (
	bearerRE = regexp.MustCompile(`(?i)bearer\s+[^\s"',;]+`)
	// keyRE matches the shapes of OpenAI, Anthropic and OpenRouter keys,
	// Google API keys and AWS access key ids, for servers that echo a key
	// we were not told about.
	keyRE = regexp.MustCompile(`\b(sk|rk)-[A-Za-z0-9_\-]{12,}|\bAIza[0-9A-Za-z_\-]{30,}|\b(AKIA|ASIA)[0-9A-Z]{16}\b`)
)

// Redact removes the given secrets, bearer tokens and anything shaped like
// an API key from s.
func Redact(s string, secrets ...string) string {
	for _, k := range secrets {
		if k = strings.TrimSpace(k); k != "" {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	s = bearerRE.ReplaceAllString(s, "Bearer [redacted]")
	return keyRE.ReplaceAllString(s, "[redacted]")
}

// Describe pulls the human part out of an error body in the shapes
// servers use: {"error":{"message","type"}} (OpenAI, Anthropic, llama.cpp,
// Ollama's OpenAI endpoint), {"error":"..."} (Ollama), {"message":"..."}
// (vLLM), {"detail":...} (FastAPI servers); otherwise the start of the text.
func Describe(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		var obj struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
			if obj.Type != "" {
				return fmt.Sprintf("%s (%s)", obj.Message, obj.Type)
			}
			return obj.Message
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return s
		case v.Message != "":
			return v.Message
		case json.Unmarshal(v.Detail, &s) == nil && s != "":
			return s
		case len(v.Detail) > 0:
			return truncate(string(v.Detail))
		}
	}
	return truncate(string(body))
}

func truncate(s string) string {
	const max = 300
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// withoutURL drops the URL a *url.Error carries and keeps the network
// error under it.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}
