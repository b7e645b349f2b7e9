package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// Task-augmented calls (protocol revision 2025-11-25). A tool the server
// runs only as a task (execution.taskSupport "required") is called with a
// "task" parameter; the server answers at once with a task, which
// Tollgate polls (tasks/get) until it ends, then fetches its result
// (tasks/result). The task id is kept in the call's record and in the
// heartbeat details, so an attempt after a worker crash or stop polls the
// same task rather than calling the tool again; a call cancelled (the
// turn cancelled it, or its timeout passed) cancels the task
// (tasks/cancel).
//
// The SDK's client has no task methods and cannot send a request it does
// not know: ClientSession's requests are a fixed set, and its transport's
// connection cannot be wrapped without losing the streamable transport's
// unexported session hooks. So after the SDK's handshake Tollgate sends
// the task requests itself, on the session's HTTP endpoint with its
// session id, protocol version, headers and credential; tasks are offered
// only for HTTP servers, where a task outlives the session that started
// it.

// Bounds on how often a task is polled: the server's pollInterval, kept
// between these.
const (
	minTaskPoll     = 100 * time.Millisecond
	defaultTaskPoll = time.Second
	maxTaskPoll     = 10 * time.Second
)

// taskInfo is a task as tasks/get, tasks/cancel and a CreateTaskResult
// carry it.
type taskInfo struct {
	TaskID        string   `json:"taskId"`
	Status        string   `json:"status"`
	StatusMessage string   `json:"statusMessage,omitempty"`
	PollInterval  *float64 `json:"pollInterval,omitempty"`
}

// Task statuses.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// runTask runs a call as a task, or goes on polling the task an earlier
// attempt started.
func (t *mcpTool) runTask(ctx context.Context, call tool.Call, st callState, run string) (results.Outcome, error) {
	s := t.srv
	if r := call.Resume; r != nil && r.Decision != results.DecisionConnected {
		return results.FailTool("a call of %s cannot go on after a %q decision", t.spec.Name, r.Decision), nil
	}
	progress := newProgressSink(ctx, stateKey(st.callKey)[:32])
	sess, err := s.connect(ctx, sessionOptions{user: call.User, progress: progress, tasks: newTaskTap()})
	if err != nil {
		if c, sent := sess.challenged(); c != nil {
			return t.needConnection(ctx, call, st, nil, run, c, sent)
		}
		return t.failed(err)
	}
	defer sess.close(ctx)
	taskID := st.Task
	if taskID == "" && activity.IsActivity(ctx) && activity.HasHeartbeatDetails(ctx) {
		// The record may be on a data directory this worker does not
		// share; the attempt before this one said which task it polled.
		var p Progress
		if activity.GetHeartbeatDetails(ctx, &p) == nil {
			taskID = p.Task
		}
	}
	if taskID == "" {
		if !sess.tap.tasksForCalls() {
			return results.FailTool("%s no longer declares task-augmented tool calls, and runs %s only as a task; the call did not run", s.name, t.mcpName), nil
		}
		args := call.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		params := map[string]any{
			"name": t.mcpName, "arguments": args,
			// The server keeps the task (and its result) at least as long
			// as the call may take.
			"task":  map[string]any{"ttl": (s.cfg.timeout() + time.Minute).Milliseconds()},
			"_meta": map[string]any{"progressToken": progress.token},
		}
		raw, err := sess.rawCall(ctx, s.cfg.URL, "tools/call", params)
		if ctx.Err() != nil {
			// Whether the server created the task is unknown.
			return results.Outcome{}, fmt.Errorf("%s: %w", t.spec.Name, ctx.Err())
		}
		if err != nil {
			return t.taskFailed(ctx, sess, err)
		}
		var created struct {
			Task *taskInfo `json:"task"`
		}
		if err := json.Unmarshal(raw, &created); err != nil {
			return results.Outcome{}, fmt.Errorf("%s: the server's answer to a task-augmented call does not decode: %w", t.spec.Name, err)
		}
		if created.Task == nil || created.Task.TaskID == "" {
			// The server ran the call at once: a plain result.
			return t.taskResult(ctx, st, raw)
		}
		if len(created.Task.TaskID) > 512 {
			return results.FailTool("%s named its task with an id longer than 512 bytes; the call's outcome is unknown", s.name), nil
		}
		taskID = created.Task.TaskID
		st.Task, st.SavedBy, st.Updated = taskID, run, time.Now().UTC()
		if err := s.states.save(ctx, st); err != nil {
			return results.Outcome{}, fmt.Errorf("%s: %w", t.spec.Name, err)
		}
		progress.report(Progress{Task: taskID, Status: created.Task.Status, Message: oneLine(created.Task.StatusMessage, maxProgressMessage)})
	}
	return t.pollTask(ctx, sess, st, taskID, progress)
}

// pollTask polls the task until it ends, and returns the call's outcome.
func (t *mcpTool) pollTask(ctx context.Context, sess *session, st callState, taskID string, progress *progressSink) (results.Outcome, error) {
	s := t.srv
	for {
		raw, err := sess.rawCall(ctx, s.cfg.URL, "tasks/get", map[string]any{"taskId": taskID})
		if ctx.Err() != nil {
			return t.taskStopped(ctx, sess, st, taskID)
		}
		if err != nil {
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				// The server does not know the task (expired, or a server
				// that keeps tasks per session): polling again will not help.
				_ = s.states.remove(ctx, st.callKey)
				return results.FailTool("%s no longer knows the task running this call (%s); its outcome is unknown", s.name, clean(rpcErr.Message, 512)), nil
			}
			return t.taskFailed(ctx, sess, err)
		}
		var info taskInfo
		if err := json.Unmarshal(raw, &info); err != nil {
			return results.Outcome{}, fmt.Errorf("%s: the task's status does not decode: %w", t.spec.Name, err)
		}
		progress.report(Progress{Task: taskID, Status: info.Status, Message: oneLine(info.StatusMessage, maxProgressMessage)})
		switch info.Status {
		case taskWorking:
		case taskCompleted, taskFailed:
			raw, err := sess.rawCall(ctx, s.cfg.URL, "tasks/result", map[string]any{"taskId": taskID})
			if ctx.Err() != nil {
				return t.taskStopped(ctx, sess, st, taskID)
			}
			if err != nil {
				var rpcErr *jsonrpc.Error
				if errors.As(err, &rpcErr) {
					_ = s.states.remove(ctx, st.callKey)
				}
				return t.taskFailed(ctx, sess, err)
			}
			return t.taskResult(ctx, st, raw)
		case taskCancelled:
			_ = s.states.remove(ctx, st.callKey)
			return results.FailTool("%s cancelled the task running this call; it did not finish", s.name), nil
		case taskInputRequired:
			// Its questions would come through tasks/result on a session
			// held open; Tollgate does not relay them yet.
			t.cancelTask(ctx, sess, taskID)
			_ = s.states.remove(ctx, st.callKey)
			return results.FailTool("%s asked for the user's input inside a task, which Tollgate does not relay; the task was cancelled", s.name), nil
		default:
			t.cancelTask(ctx, sess, taskID)
			_ = s.states.remove(ctx, st.callKey)
			return results.FailTool("%s reported its task as %q, not a task status; the task was cancelled", s.name, clean(info.Status, 64)), nil
		}
		wait := defaultTaskPoll
		if info.PollInterval != nil {
			wait = min(max(time.Duration(*info.PollInterval)*time.Millisecond, minTaskPoll), maxTaskPoll)
		}
		select {
		case <-ctx.Done():
			return t.taskStopped(ctx, sess, st, taskID)
		case <-time.After(wait):
		}
	}
}

// taskResult maps the result of a task (or of a call the server ran at
// once) onto the call's outcome.
func (t *mcpTool) taskResult(ctx context.Context, st callState, raw json.RawMessage) (results.Outcome, error) {
	s := t.srv
	var res mcpsdk.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		_ = s.states.remove(ctx, st.callKey)
		return results.Outcome{}, fmt.Errorf("%s: the task's result does not decode: %w", t.spec.Name, err)
	}
	if err := s.states.remove(ctx, st.callKey); err != nil {
		s.opts.Logger.Warn("Could not remove an MCP call's record", "mcp_server", s.name, "error", err)
	}
	return toOutcome(s.name, &res)
}

// taskStopped ends a run whose context ended while its task runs. A
// worker that stops leaves the task to the next attempt; a call that was
// cancelled, or ran out of time, cancels it.
func (t *mcpTool) taskStopped(ctx context.Context, sess *session, st callState, taskID string) (results.Outcome, error) {
	if !errors.Is(context.Cause(ctx), worker.ErrWorkerShutdown) {
		t.cancelTask(ctx, sess, taskID)
		_ = t.srv.states.remove(context.WithoutCancel(ctx), st.callKey)
	}
	return results.Outcome{}, fmt.Errorf("%s: %w", t.spec.Name, ctx.Err())
}

// cancelTask asks the server to cancel the task, briefly: the call is
// over either way.
func (t *mcpTool) cancelTask(ctx context.Context, sess *session, taskID string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := sess.rawCall(cctx, t.srv.cfg.URL, "tasks/cancel", map[string]any{"taskId": taskID}); err != nil {
		t.srv.opts.Logger.Warn("MCP task not cancelled", "mcp_server", t.srv.name, "tool", t.spec.Name, "error", t.srv.redact(err))
	}
}

// taskFailed classifies a failed task request as failed does a call's.
func (t *mcpTool) taskFailed(ctx context.Context, sess *session, err error) (results.Outcome, error) {
	if c, sent := sess.challenged(); c != nil {
		return results.FailTool("%s refused a task request (HTTP %d, the connection sent: %v); the call's outcome is unknown", t.srv.name, c.status, sent), nil
	}
	if sess.over.Load() {
		err = fmt.Errorf("%w: %w", errTooLarge, err)
	}
	return t.failed(err)
}

// rawSeq numbers the requests Tollgate sends outside the SDK; the prefix
// keeps their ids apart from the SDK's own.
var rawSeq atomic.Int64

// maxRawResponse bounds one answer to a task request.
const maxRawResponse = 8 << 20

// rawCall sends one JSON-RPC request on the session's HTTP endpoint and
// returns its result, or a *jsonrpc.Error.
func (sess *session) rawCall(ctx context.Context, endpoint, method string, params any) (json.RawMessage, error) {
	if sess.httpc == nil || sess.cs == nil {
		return nil, errors.New("task requests need an open HTTP session")
	}
	id := fmt.Sprintf("tollgate-%d", rawSeq.Add(1))
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid := sess.cs.ID(); sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if ir := sess.cs.InitializeResult(); ir != nil {
		req.Header.Set("Mcp-Protocol-Version", ir.ProtocolVersion)
	}
	if sess.auth != nil && req.Header.Get("Authorization") == "" {
		ts, err := sess.auth.TokenSource(ctx)
		if err != nil {
			return nil, err
		}
		if ts != nil {
			tok, err := ts.Token()
			if err != nil {
				return nil, fmt.Errorf("%s: the connection's token: %w", method, err)
			}
			req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		}
	}
	resp, err := sess.httpc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		_ = sess.auth.Authorize(ctx, req, resp)
		return nil, fmt.Errorf("%s: HTTP %d", method, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", method, resp.StatusCode)
	}
	r := io.LimitReader(resp.Body, maxRawResponse)
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" {
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("%s: read the answer: %w", method, err)
		}
		res, ok, err := rawResponse(b, id)
		if !ok && err == nil {
			err = fmt.Errorf("%s: the answer is not the response to the request", method)
		}
		return res, err
	}
	// An SSE stream: the response is one of its data lines (others may
	// be the server's notifications).
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxRawResponse)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		if res, ok, err := rawResponse([]byte(line), id); ok || err != nil {
			return res, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: read the answer: %w", method, err)
	}
	return nil, fmt.Errorf("%s: the stream ended without a response", method)
}

// rawResponse reads msg as the response to request id.
func rawResponse(msg []byte, id string) (json.RawMessage, bool, error) {
	var m struct {
		ID     any             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(bytes.TrimSpace(msg), &m) != nil || m.ID != id {
		return nil, false, nil
	}
	if m.Error != nil {
		return nil, true, &jsonrpc.Error{Code: m.Error.Code, Message: m.Error.Message}
	}
	return m.Result, true, nil
}
