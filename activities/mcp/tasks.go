package mcp

import (
	"bytes"
	"encoding/json"
	"sync"
)

// taskTap reads what a session receives for what the SDK does not
// decode: the tools that declare execution.taskSupport (the SDK's Tool
// type has no field for it) and whether the server declares task-augmented
// tools/call (capabilities.tasks.requests.tools.call; the SDK's
// ServerCapabilities has none either). A tool whose server requires
// task-augmented calls fails every plain call.
type taskTap struct {
	mu       sync.Mutex
	line     []byte
	required map[string]bool
	// serverTasks: the server said, when the session began, that it runs
	// tools/call as tasks.
	serverTasks bool
}

// maxTapLine bounds one message the tap looks at; a tools/list result is
// bounded by the session's budget anyway.
const maxTapLine = 8 << 20

func newTaskTap() *taskTap { return &taskTap{required: map[string]bool{}} }

// Write takes a copy of the bytes received: JSON-RPC messages one per
// line (stdio) or as SSE "data:" lines or whole JSON bodies (HTTP).
func (t *taskTap) Write(p []byte) (int, error) {
	n := len(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(t.line)+len(p) <= maxTapLine {
				t.line = append(t.line, p...)
			}
			break
		}
		if len(t.line)+i <= maxTapLine {
			t.line = append(t.line, p[:i]...)
		}
		t.scan(t.line)
		t.line = t.line[:0]
		p = p[i+1:]
	}
	return n, nil
}

// flush scans what is left (an HTTP body without a final newline).
func (t *taskTap) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.scan(t.line)
	t.line = t.line[:0]
}

func (t *taskTap) scan(line []byte) {
	line = bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(line), []byte("data:")))
	if bytes.Contains(line, []byte(`"capabilities"`)) && bytes.Contains(line, []byte(`"tasks"`)) {
		var init struct {
			Result struct {
				Capabilities struct {
					Tasks struct {
						Requests struct {
							Tools struct {
								Call *json.RawMessage `json:"call"`
							} `json:"tools"`
						} `json:"requests"`
					} `json:"tasks"`
				} `json:"capabilities"`
			} `json:"result"`
		}
		if json.Unmarshal(line, &init) == nil && init.Result.Capabilities.Tasks.Requests.Tools.Call != nil {
			t.serverTasks = true
		}
	}
	if !bytes.Contains(line, []byte(`"taskSupport"`)) {
		return
	}
	var msg struct {
		Result struct {
			Tools []struct {
				Name      string `json:"name"`
				Execution struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			} `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(line, &msg) != nil {
		return
	}
	for _, tl := range msg.Result.Tools {
		if tl.Execution.TaskSupport == "required" {
			t.required[tl.Name] = true
		}
	}
}

// requiresTasks says whether the server declared the tool as one that
// only runs as a task.
func (t *taskTap) requiresTasks(name string) bool {
	if t == nil {
		return false
	}
	t.flush()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.required[name]
}

// tasksForCalls says whether the server declared task-augmented
// tools/call when the session began.
func (t *taskTap) tasksForCalls() bool {
	if t == nil {
		return false
	}
	t.flush()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.serverTasks
}
