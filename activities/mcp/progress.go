package mcp

import (
	"context"
	"fmt"
	"math"
	"sync"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/stream"
)

// Progress is what a call reports once its server sends progress
// (notifications/progress for the call's progressToken): how far it is,
// out of what total (0: unknown), and what it says it is doing. It goes
// out through stream.Progress: the turn's live events carry it as a
// tool_progress event (the card shows it), and it is the activity's
// heartbeat details.
//
// A call the server runs as a task reports its task too: Task is the
// server's task id and Status the task's status (working, completed...),
// with the server's status message as Message.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
	Task     string  `json:"task,omitempty"`
	Status   string  `json:"status,omitempty"`
}

// maxProgressMessage bounds the server's words about its progress.
const maxProgressMessage = 512

// progressSink receives one call's progress notifications.
type progressSink struct {
	token  string
	record func(Progress)

	mu   sync.Mutex
	last *Progress
}

// newProgressSink reports a call's progress on the run ctx belongs to
// (outside a tool run, it is only kept).
func newProgressSink(ctx context.Context, token string) *progressSink {
	p := &progressSink{token: token, record: func(Progress) {}}
	p.attach(ctx)
	return p
}

// reporter is how progress leaves a run: stream.Progress, which RunTool
// turns into the activity's heartbeat and the turn's tool_progress event.
func reporter(ctx context.Context) func(Progress) {
	return func(pr Progress) { stream.Progress(ctx, pr) }
}

func (p *progressSink) handle(_ context.Context, req *mcpsdk.ProgressNotificationClientRequest) {
	if p == nil || req == nil || req.Params == nil || fmt.Sprint(req.Params.ProgressToken) != p.token {
		// Another request's progress (or a server's mistake) is not this
		// call's to show.
		return
	}
	pr := Progress{Progress: finite(req.Params.Progress), Total: finite(req.Params.Total), Message: oneLine(req.Params.Message, maxProgressMessage)}
	p.mu.Lock()
	p.last = &pr
	record := p.record
	p.mu.Unlock()
	record(pr)
}

// report records pr as the call's latest progress and reports it.
func (p *progressSink) report(pr Progress) {
	p.mu.Lock()
	p.last = &pr
	record := p.record
	p.mu.Unlock()
	record(pr)
}

// attach reports progress on the tool run ctx belongs to (a held call's
// next run).
func (p *progressSink) attach(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record = reporter(ctx)
}

// detach stops recording: the run has ended.
func (p *progressSink) detach() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record = func(Progress) {}
}

// latest is the last progress the server reported, nil if none.
func (p *progressSink) latest() *Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return nil
	}
	cp := *p.last
	return &cp
}

func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0
	}
	return f
}
