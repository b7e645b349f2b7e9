package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// taskServer is a small MCP server of the test's own over HTTP (JSON
// responses) that speaks tasks (protocol 2025-11-25): "build" runs only as
// a task, which completes once the test lets it (or after polls polls).
type taskServer struct {
	srv *httptest.Server
	// noTasks leaves tasks out of the server's capabilities.
	noTasks bool

	mu        sync.Mutex
	calls     int // tools/call requests
	taskCalls int // of which task-augmented
	gets      int
	results   int
	cancelled []string
	status    map[string]string
	created   chan string
	release   chan struct{}
}

func newTaskServer(t *testing.T, noTasks bool) *taskServer {
	ts := &taskServer{noTasks: noTasks, status: map[string]string{}, created: make(chan string, 4), release: make(chan struct{})}
	ts.srv = httptest.NewServer(http.HandlerFunc(ts.serve))
	t.Cleanup(ts.srv.Close)
	return ts
}

func (ts *taskServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		// No standalone stream, no session to delete.
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		ID     any             `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	if req.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	answer := func(result any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
	fail := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": code, "message": msg}})
	}
	var p struct {
		Name   string          `json:"name"`
		Task   json.RawMessage `json:"task"`
		TaskID string          `json:"taskId"`
	}
	_ = json.Unmarshal(req.Params, &p)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	switch req.Method {
	case "initialize":
		caps := map[string]any{"tools": map[string]any{}}
		if !ts.noTasks {
			caps["tasks"] = map[string]any{"cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
		}
		answer(map[string]any{"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": map[string]any{"name": "tasks", "version": "1"}})
	case "tools/list":
		answer(map[string]any{"tools": []any{
			map[string]any{"name": "build", "description": "Build it, slowly.", "inputSchema": map[string]any{"type": "object"}, "execution": map[string]any{"taskSupport": "required"}, "annotations": map[string]any{"readOnlyHint": true}},
			map[string]any{"name": "ping", "description": "Answer at once.", "inputSchema": map[string]any{"type": "object"}, "annotations": map[string]any{"readOnlyHint": true}},
		}})
	case "tools/call":
		ts.calls++
		if len(p.Task) == 0 {
			if p.Name == "build" {
				fail(-32600, "build runs only as a task")
				return
			}
			answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": "pong"}}})
			return
		}
		ts.taskCalls++
		id := fmt.Sprintf("task-%d", ts.taskCalls)
		ts.status[id] = taskWorking
		ts.created <- id
		answer(map[string]any{"task": map[string]any{"taskId": id, "status": taskWorking, "statusMessage": "queued", "pollInterval": 50, "createdAt": time.Now().Format(time.RFC3339)}})
	case "tasks/get":
		ts.gets++
		st, ok := ts.status[p.TaskID]
		if !ok {
			fail(-32602, "no such task")
			return
		}
		select {
		case <-ts.release:
			if st == taskWorking {
				st = taskCompleted
				ts.status[p.TaskID] = st
			}
		default:
		}
		answer(map[string]any{"taskId": p.TaskID, "status": st, "statusMessage": "compiling", "pollInterval": 50})
	case "tasks/result":
		ts.results++
		answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": "built " + p.TaskID}}})
	case "tasks/cancel":
		ts.cancelled = append(ts.cancelled, p.TaskID)
		ts.status[p.TaskID] = taskCancelled
		answer(map[string]any{"taskId": p.TaskID, "status": taskCancelled})
	default:
		fail(-32601, "method not found")
	}
}

func openTasks(t *testing.T, ts *taskServer, states string) *Toolset {
	t.Helper()
	set, err := Open(context.Background(), Config{Servers: map[string]Server{"ci": {URL: ts.srv.URL + "/mcp"}}}, Options{StateDir: states})
	require.NoError(t, err)
	t.Cleanup(set.Close)
	return set
}

func toolNamed(t *testing.T, set *Toolset, name string) tool.Tool {
	t.Helper()
	for _, tl := range set.Tools() {
		if tl.Spec().Name == name {
			return tl
		}
	}
	require.Failf(t, "no tool", "%s is not offered", name)
	return nil
}

// A tool the server runs only as a task is offered when the server
// declares task-augmented calls; its call creates the task, polls it and
// returns the task's result, and leaves no record behind.
func TestTaskRequiredToolRunsAsATask(t *testing.T) {
	srv := newTaskServer(t, false)
	states := t.TempDir()
	set := openTasks(t, srv, states)
	build := toolNamed(t, set, "ci.build")
	close(srv.release)
	out := run(t, build, tool.Call{TurnID: "turn-t", CallID: "c1"})
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, "built task-1", out.Success.Parts[0].Text)
	// A tool without task support is called plainly.
	out = run(t, toolNamed(t, set, "ci.ping"), tool.Call{TurnID: "turn-t", CallID: "c2"})
	require.Equal(t, "pong", out.Success.Parts[0].Text)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	require.Equal(t, 1, srv.taskCalls, "the tool ran once, as a task")
	require.Equal(t, 2, srv.calls)
	require.GreaterOrEqual(t, srv.gets, 1)
	require.Equal(t, 1, srv.results)
	require.Empty(t, srv.cancelled)
	k := callKey{Turn: "turn-t", Call: "c1"}
	_, found, err := set.servers[0].states.load(context.Background(), k)
	require.NoError(t, err)
	require.False(t, found, "the finished call's record is gone")
}

// A worker that stops while the task runs leaves it running; the next
// attempt (another toolset over the same data directory, as a new worker
// would open) polls the same task and gets its result without calling
// the tool again.
func TestTaskPollingResumesAfterTheWorkerStops(t *testing.T) {
	srv := newTaskServer(t, false)
	states := t.TempDir()
	first := openTasks(t, srv, states)
	call := tool.Call{TurnID: "turn-t", CallID: "c1"}
	ctx, stop := context.WithCancelCause(context.Background())
	go func() {
		<-srv.created
		// Once the call polls the task it created.
		time.Sleep(150 * time.Millisecond)
		stop(worker.ErrWorkerShutdown)
	}()
	_, err := toolNamed(t, first, "ci.build").Run(ctx, call)
	require.ErrorIs(t, err, context.Canceled)
	srv.mu.Lock()
	require.Empty(t, srv.cancelled, "a stopping worker leaves the task to the next attempt")
	srv.mu.Unlock()
	first.Close()

	second := openTasks(t, srv, states)
	close(srv.release)
	out := run(t, toolNamed(t, second, "ci.build"), call)
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, "built task-1", out.Success.Parts[0].Text, "the same task's result")
	srv.mu.Lock()
	defer srv.mu.Unlock()
	require.Equal(t, 1, srv.calls, "the tool was not called again")
}

// A call that is cancelled (the turn cancelled it, or its timeout
// passed) cancels its task at the server.
func TestCancelledCallCancelsItsTask(t *testing.T) {
	srv := newTaskServer(t, false)
	set := openTasks(t, srv, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-srv.created
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	_, err := toolNamed(t, set, "ci.build").Run(ctx, tool.Call{TurnID: "turn-t", CallID: "c1"})
	require.ErrorIs(t, err, context.Canceled)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	require.Equal(t, []string{"task-1"}, srv.cancelled)
	_, found, err := set.servers[0].states.load(context.Background(), callKey{Turn: "turn-t", Call: "c1"})
	require.NoError(t, err)
	require.False(t, found)
}

// A server that requires tasks for a tool but does not declare
// task-augmented calls does not get the tool offered.
func TestTaskRequiredToolNeedsTheServersTaskCapability(t *testing.T) {
	srv := newTaskServer(t, true)
	set := openTasks(t, srv, t.TempDir())
	var reason string
	for _, s := range set.Skipped() {
		if s.Tool == "build" {
			reason = s.Reason
		}
	}
	require.Contains(t, reason, "capabilities.tasks.requests.tools.call")
	require.Len(t, set.Tools(), 1)
}
