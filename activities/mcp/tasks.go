package mcp

import (
	"bytes"
	"encoding/json"
	"sync"
)

// taskTap reads what a discovery session receives for the tools that
// declare execution.taskSupport. The SDK's Tool type has no field for it,
// and a tool whose server requires task-augmented calls fails every
// plain call, so such a tool must not be offered: Tollgate's client does
// not make task-augmented calls.
type taskTap struct {
	mu       sync.Mutex
	line     []byte
	required map[string]bool
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
