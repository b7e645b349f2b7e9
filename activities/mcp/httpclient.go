package mcp

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// errTooLarge ends a session that received more than its bound.
var errTooLarge = errors.New("the server sent more than the configured max_result_bytes")

// httpClient returns the client one session uses: configured headers on
// every request (a stored user credential, set by the SDK, wins over a
// configured Authorization), no redirects (they would carry the headers
// to another host), and at most limit bytes received over the session.
func httpClient(base *http.Client, headers http.Header, limit int64, over *atomic.Bool, tap io.Writer) *http.Client {
	rt := http.DefaultTransport
	if base != nil && base.Transport != nil {
		rt = base.Transport
	}
	c := &http.Client{
		Transport: &headerTransport{base: rt, headers: headers, budget: &atomic.Int64{}, over: over, tap: tap},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	c.Transport.(*headerTransport).budget.Store(limit)
	if base != nil {
		c.Timeout = base.Timeout
		c.Jar = base.Jar
	}
	return c
}

type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
	// budget is what the session may still receive, over all responses;
	// over records that it ran out.
	budget *atomic.Int64
	over   *atomic.Bool
	// tap, when set, gets a copy of what is received.
	tap io.Writer
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for name, values := range t.headers {
		if req.Header.Get(name) == "" {
			req.Header[name] = values
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &budgetBody{rc: resp.Body, budget: t.budget, over: t.over, tap: t.tap}
	return resp, nil
}

// budgetBody fails a read that would go past the session's budget.
type budgetBody struct {
	rc     io.ReadCloser
	budget *atomic.Int64
	over   *atomic.Bool
	tap    io.Writer
}

func (b *budgetBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 && b.budget.Add(-int64(n)) < 0 {
		b.over.Store(true)
		return 0, fmt.Errorf("read response: %w", errTooLarge)
	}
	if n > 0 && b.tap != nil {
		_, _ = b.tap.Write(p[:n])
	}
	if err != nil && b.tap != nil {
		// A JSON body ends without a newline; end its message here.
		_, _ = b.tap.Write([]byte("\n"))
	}
	return n, err
}

func (b *budgetBody) Close() error { return b.rc.Close() }
