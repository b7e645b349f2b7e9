// Package webhooktest is a webhook receiver for tests of the delivery
// activity and of the workflow that runs it.
package webhooktest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// LeakyBody is what every answer of a Receiver carries: a receiver's error
// page with a secret in it, which no card or log may repeat.
const LeakyBody = "receiver stack trace: db password hunter2"

// Receiver is a webhook endpoint that answers the statuses it was given
// in order, then 200, and keeps what it got.
type Receiver struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []Delivery
}

// Delivery is one request a Receiver got.
type Delivery struct {
	Header http.Header
	Body   []byte
}

// NewReceiver starts a Receiver, closed when the test ends.
func NewReceiver(t *testing.T, statuses ...int) *Receiver {
	t.Helper()
	r := &Receiver{statuses: statuses}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, Delivery{Header: req.Header.Clone(), Body: body})
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(LeakyBody))
	}))
	t.Cleanup(r.Close)
	return r
}

// Deliveries are the requests received so far, in order.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.got...)
}

// Count is how many requests were received so far.
func (r *Receiver) Count() int { return len(r.Deliveries()) }
