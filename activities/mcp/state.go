package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/atomicfile"
)

// DefaultStateMaxAge is how long the record of a call waiting for an
// elicitation answer is kept. A turn's default response timeout is 24h;
// a record older than this belongs to a turn that has long moved on.
const DefaultStateMaxAge = 30 * 24 * time.Hour

// callState is what one tool call remembers between its runs: the answers
// people gave to the server's earlier questions and the question it waits
// on now. A run re-issues the call and answers every question it has an
// answer for at once, so the state must outlive the worker that asked.
type callState struct {
	Version int `json:"version"`
	callKey
	Tool string `json:"tool"`
	// Answers are given to the server in the order it asks, per question.
	Answers []storedAnswer `json:"answers,omitempty"`
	// Pending is the question a person is being asked.
	Pending *question `json:"pending,omitempty"`
	// Asked counts the questions put to people for this call.
	Asked int `json:"asked"`
	// Round is a multi-round-trip request in progress (protocol
	// 2026-07-28): the server's input requests, its request state and
	// the answers gathered so far. The call is issued again only when
	// every request has its answer; no session stays open meanwhile.
	Round *round `json:"round,omitempty"`
	// Task is the server's task running the call (a task-augmented call):
	// an attempt that finds it polls the task rather than calling again.
	Task string `json:"task,omitempty"`
	// SavedBy is the activity run that saved this state: a retried
	// attempt of that run finds its answer already among Answers.
	SavedBy string    `json:"saved_by,omitempty"`
	Updated time.Time `json:"updated"`
}

// storedAnswer is the result handed to the server for one question,
// named by the question's fingerprint.
type storedAnswer struct {
	Question string         `json:"question"`
	Action   string         `json:"action"`
	Content  map[string]any `json:"content,omitempty"`
}

// stateVersion 2 binds records to their workflow execution; version 1
// records (turn and call only) are never read again and age out.
const stateVersion = 2

// callKey names one call of one execution of a turn. Turn and call ids
// are not enough: a caller may start a new run under the id of a turn
// that was cancelled while a call waited, and a scripted or replayed
// model gives its calls the same ids again, so answers people gave the
// old run would be handed to the new one's server.
type callKey struct {
	// Execution names the turn's chain of runs (tool.Call.Execution; ""
	// outside an activity), so a call parked across a continue-as-new
	// finds its record, and a new turn under an old id never does.
	Execution string `json:"execution,omitempty"`
	Turn      string `json:"turn"`
	Call      string `json:"call"`
}

// stateStore keeps call states by execution, turn and call id.
type stateStore interface {
	load(ctx context.Context, k callKey) (callState, bool, error)
	save(ctx context.Context, st callState) error
	remove(ctx context.Context, k callKey) error
}

// stateKey names a call's record: a hash, so that ids chosen by a model
// or a caller never become paths.
func stateKey(k callKey) string {
	sum := sha256.Sum256([]byte(k.Execution + "\x00" + k.Turn + "\x00" + k.Call))
	return hex.EncodeToString(sum[:])
}

// fileStates keeps each call's record in its own file, written
// atomically, readable by the owner only. Every worker that may run a
// turn's calls must see the same directory, as with the payload store.
type fileStates struct {
	dir string
}

func newFileStates(dir string, maxAge time.Duration) (*fileStates, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("mcp state: create %s: %w", dir, err)
	}
	s := &fileStates{dir: dir}
	s.prune(maxAge)
	return s, nil
}

// prune removes records nobody will ask for again: their turn ended
// while the call waited (a cancel, a timeout) and nothing deleted them.
func (s *fileStates) prune(maxAge time.Duration) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-maxAge)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			_ = os.Remove(filepath.Join(s.dir, e.Name()))
		}
	}
}

func (s *fileStates) path(k callKey) string {
	return filepath.Join(s.dir, stateKey(k)+".json")
}

func (s *fileStates) load(_ context.Context, k callKey) (callState, bool, error) {
	b, err := os.ReadFile(s.path(k))
	if errors.Is(err, fs.ErrNotExist) {
		return callState{}, false, nil
	}
	if err != nil {
		return callState{}, false, fmt.Errorf("mcp state: read: %w", err)
	}
	var st callState
	if err := json.Unmarshal(b, &st); err != nil {
		return callState{}, false, fmt.Errorf("mcp state: decode %s: %w", s.path(k), err)
	}
	if st.Version != stateVersion || st.callKey != k {
		return callState{}, false, fmt.Errorf("mcp state: %s holds version %d of %s/%s, not version %d of this call", s.path(k), st.Version, st.Turn, st.Call, stateVersion)
	}
	return st, true, nil
}

func (s *fileStates) save(_ context.Context, st callState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("mcp state: encode: %w", err)
	}
	if err := atomicfile.Write(s.path(st.callKey), b, 0o600); err != nil {
		return fmt.Errorf("mcp state: write: %w", err)
	}
	return nil
}

func (s *fileStates) remove(_ context.Context, k callKey) error {
	if err := os.Remove(s.path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mcp state: remove: %w", err)
	}
	return nil
}

// memoryStates forgets everything with the process: an answer that
// arrives after a worker restart then finds no record and the call ends
// with a tool error saying so.
type memoryStates struct {
	mu sync.Mutex
	m  map[string]callState
}

func newMemoryStates() *memoryStates { return &memoryStates{m: map[string]callState{}} }

func (s *memoryStates) load(_ context.Context, k callKey) (callState, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[stateKey(k)]
	return st, ok, nil
}

func (s *memoryStates) save(_ context.Context, st callState) error {
	// A round trip through JSON keeps later changes to st out of the
	// store, as the file store does.
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("mcp state: encode: %w", err)
	}
	var cp callState
	if err := json.Unmarshal(b, &cp); err != nil {
		return fmt.Errorf("mcp state: decode: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[stateKey(st.callKey)] = cp
	return nil
}

func (s *memoryStates) remove(_ context.Context, k callKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, stateKey(k))
	return nil
}

// round is one input_required result of a call: its input requests, as
// questions, in the order they are put to the person.
type round struct {
	// State is the server's opaque request state, echoed on the re-issue.
	State     string                  `json:"state,omitempty"`
	Order     []string                `json:"order"`
	Questions map[string]*question    `json:"questions"`
	Answers   map[string]storedAnswer `json:"answers,omitempty"`
	// Current is the input request the pending question is for.
	Current string `json:"current,omitempty"`
}

// next is the first input request still without an answer.
func (r *round) next() (string, bool) {
	for _, id := range r.Order {
		if _, ok := r.Answers[id]; !ok {
			return id, true
		}
	}
	return "", false
}
