package mcp

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server on a 2025 protocol revision asks its question with a request
// in the middle of the call, and the call can only go on if that request
// is answered. So the run that meets such a question parks the call as
// usual (the state is saved, the turn waits durably) but keeps the call
// open on this worker for the server's timeout: when the answer comes
// back to this worker within that window, the waiting request gets it
// and the call goes on where it stopped; the server does nothing twice.
// Otherwise (the window passed, the worker restarted, another worker
// took the answer) the held call is cancelled and the answer takes the
// durable path: the call is issued again and the question answered from
// the record.

// heldCall is a call running on a context of its own, waiting for the
// person's answer to its server's question or for its end.
type heldCall struct {
	key      callKey
	question string
	el       *elicitor
	progress *progressSink
	cancel   context.CancelFunc
	done     chan callDone
	timer    *time.Timer
	// ended is set when the call has ended: there is nothing to hold.
	ended atomic.Bool

	mu       sync.Mutex
	stopFunc func() bool
}

// callDone is how a call ended.
type callDone struct {
	res  *mcpsdk.CallToolResult
	err  error
	sess *session
}

// follow ties the call to the activity run ctx belongs to: cancelling
// the run cancels the call, and progress becomes its heartbeats.
func (h *heldCall) follow(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopFunc = context.AfterFunc(ctx, h.cancel)
	h.progress.attach(ctx)
}

// unfollow unties the call from its run, which is ending.
func (h *heldCall) unfollow() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopFunc != nil {
		h.stopFunc()
		h.stopFunc = nil
	}
	h.progress.detach()
}

// release gives up on the held call: its question is answered with an
// error and the call cancelled.
func (h *heldCall) release() {
	h.unfollow()
	h.el.release()
	h.cancel()
}

// heldCalls are the calls held open on this worker, by call.
type heldCalls struct {
	mu sync.Mutex
	m  map[callKey]*heldCall
}

// hold keeps h open for the server's call timeout, waiting for the
// answer to question.
func (s *server) hold(h *heldCall, question string) {
	h.unfollow()
	h.question = question
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	if s.held.m == nil {
		s.held.m = map[callKey]*heldCall{}
	}
	if old := s.held.m[h.key]; old != nil && old != h {
		old.release()
	}
	s.held.m[h.key] = h
	h.timer = time.AfterFunc(s.cfg.timeout(), func() {
		s.held.mu.Lock()
		mine := s.held.m[h.key] == h
		if mine {
			delete(s.held.m, h.key)
		}
		s.held.mu.Unlock()
		if mine {
			h.release()
		}
	})
}

// takeHeld returns the call held for key if it waits for question.
func (s *server) takeHeld(key callKey, question string) *heldCall {
	s.held.mu.Lock()
	defer s.held.mu.Unlock()
	h := s.held.m[key]
	if h == nil {
		return nil
	}
	delete(s.held.m, key)
	h.timer.Stop()
	if h.question != question || h.ended.Load() {
		h.release()
		return nil
	}
	return h
}
