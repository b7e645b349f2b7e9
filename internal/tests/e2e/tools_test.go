package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// gate is a test tool whose first run blocks until the test releases it:
// the test can stop a worker, cancel a turn or start another worker while
// a tool is known to be running. Later runs (retries) finish at once.
type gate struct {
	spec tool.Spec
	// honourCancel: a blocked run returns when its context ends, as a well
	// behaved tool does. Otherwise it ignores cancellation, like a process
	// that hung or a host that vanished: only release ends it.
	honourCancel bool

	runs      atomic.Int32
	started   chan int
	release   chan struct{}
	cancelled chan struct{}
	once      sync.Once
	closeOnce sync.Once
}

// heartbeatInterval makes the heartbeat timeout 3×200ms: a lost worker is
// noticed in well under a second.
const heartbeatInterval = 200 * time.Millisecond

func newGate(t *testing.T, name string, idempotent, honourCancel bool) *gate {
	g := &gate{
		spec: tool.Spec{
			Name:              name,
			Description:       "A test tool that blocks until the test releases it.",
			Schema:            []byte(`{"type":"object","properties":{"job":{"type":"string"}}}`),
			Idempotent:        idempotent,
			Concurrent:        true,
			HeartbeatInterval: heartbeatInterval,
			Timeout:           time.Minute,
		}.WithDefaults(),
		honourCancel: honourCancel,
		started:      make(chan int, 16),
		release:      make(chan struct{}),
		cancelled:    make(chan struct{}),
	}
	require.NoError(t, g.spec.Validate())
	// A run still blocked when the test ends is released so its goroutine
	// ends; its late answer can no longer change anything.
	t.Cleanup(g.open)
	return g
}

func (g *gate) Spec() tool.Spec { return g.spec }

func (g *gate) Run(ctx context.Context, call tool.Call) (results.Outcome, error) {
	n := int(g.runs.Add(1))
	g.started <- n
	if n > 1 {
		// Let a lost first run go now, so that its late answer races this
		// one: it must not win.
		g.open()
		return results.SucceedText(fmt.Sprintf("finished on run %d", n)), nil
	}
	if g.honourCancel {
		select {
		case <-g.release:
			return results.SucceedText("released"), nil
		case <-ctx.Done():
			g.once.Do(func() { close(g.cancelled) })
			return results.Outcome{}, ctx.Err()
		}
	}
	<-g.release
	return results.SucceedText(fmt.Sprintf("late result of run %d", n)), nil
}

func (g *gate) open() { g.closeOnce.Do(func() { close(g.release) }) }

// waitStarted waits for run n to begin.
func (g *gate) waitStarted(t *testing.T, n int) {
	t.Helper()
	select {
	case got := <-g.started:
		require.Equal(t, n, got, "run %d started out of turn", got)
	case <-time.After(waitTimeout):
		t.Fatalf("%s: run %d did not start within %s", g.spec.Name, n, waitTimeout)
	}
}

type issuesArgs struct {
	Repo string `json:"repo"`
}

// issuesTool needs a GitHub connection for the turn's user, looked up in
// the worker's connection store, like the built-in list_issues (which
// would reach the real GitHub API).
func issuesTool(store connections.Store) tool.Tool {
	return tool.MustFunc(tool.Spec{Name: "issues", Description: "List a repository's issues (needs a GitHub connection).", Idempotent: true, Concurrent: true},
		func(ctx context.Context, call tool.Call, a issuesArgs) (results.Outcome, error) {
			cred, err := store.Get(ctx, call.User, "github")
			if errors.Is(err, connections.ErrNotConnected) {
				return results.NeedConnection("github", "connect your GitHub account", "repo"), nil
			}
			if err != nil {
				return results.Outcome{}, err
			}
			return results.SucceedText(fmt.Sprintf("%s: #1 crash on start (as %s)", a.Repo, cred.User)), nil
		})
}

type stepArgs struct {
	Text string `json:"text"`
}

// stepTool is a sequential, idempotent tool that needs nobody.
func stepTool(log *runLog) tool.Tool {
	return tool.MustFunc(tool.Spec{Name: "step", Description: "A sequential step.", Idempotent: true},
		func(_ context.Context, _ tool.Call, a stepArgs) (results.Outcome, error) {
			log.add("step:" + a.Text)
			return results.SucceedText("did " + a.Text), nil
		})
}

// runLog records which tools ran, in order.
type runLog struct {
	mu   sync.Mutex
	runs []string
}

func (l *runLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, s)
}

func (l *runLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.runs...)
}
