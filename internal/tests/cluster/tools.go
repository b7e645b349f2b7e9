// Package cluster holds what the production-shaped cluster test shares
// with its worker binary (cmd/clusterworker): the test tools, the large
// payloads they return, and the ledger in which they record every run
// outside the workers, so the test can count what ran and where.
//
// The test itself (cluster_test.go) runs only under `make test-cluster`:
// PostgreSQL, the Temporal server binary, SeaweedFS, nats-server, two
// worker processes, killed and restarted, and two gateways. See docs/deployment.md, "Proof: make
// test-cluster".
package cluster

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// Tool names, as turns list them.
const (
	// BigOutput returns a PayloadSize output the model sees whole, so the
	// activity result and the conversation go to external payload storage.
	BigOutput = "big_output"
	// BigRaw returns the same size; the model sees 32 KiB and the rest is
	// kept in the output store (starter raw reads it).
	BigRaw = "big_raw"
	// SlowOnce is not idempotent and runs for a while: the test kills a
	// worker while it runs.
	SlowOnce = "slow_once"
	// CommitOnce is not idempotent and needs approval: the turns park on
	// it while the server is killed.
	CommitOnce = "commit_once"
)

// ToolNames are every test tool, as a turn's tools list.
var ToolNames = []string{BigOutput, BigRaw, SlowOnce, CommitOnce}

// PayloadSize is the size of a large tool output: over the 128 KiB above
// which payloads leave history.
const PayloadSize = 200 << 10

// Payload is the output of a large tool call: deterministic in the turn
// and call, so the test knows what every reader must get back.
func Payload(turnID, callID string) string {
	var b strings.Builder
	b.Grow(PayloadSize)
	seed := sha256.Sum256([]byte(turnID + "\x00" + callID))
	for line := 0; b.Len() < PayloadSize; line++ {
		h := sha256.Sum256(append(seed[:], byte(line), byte(line>>8), byte(line>>16)))
		fmt.Fprintf(&b, "%06d %s\n", line, hex.EncodeToString(h[:]))
	}
	return b.String()[:PayloadSize]
}

// Digest is the hex SHA-256 of s: what the test compares outputs by.
func Digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Entry is one line of the ledger.
type Entry struct {
	Worker string `json:"worker"`
	PID    int    `json:"pid"`
	Tool   string `json:"tool"`
	Turn   string `json:"turn"`
	Call   string `json:"call"`
	// Phase is start when a run begins and end when it returns.
	Phase string    `json:"phase"`
	At    time.Time `json:"at"`
}

// Ledger is an append-only file of Entries, shared by every worker
// process of a test and read by the test. Each entry is one write to a
// file opened for appending, so entries of concurrent processes do not
// interleave, and an entry written before a SIGKILL survives it.
type Ledger struct {
	Path   string
	Worker string
	mu     sync.Mutex
}

// Record appends an entry for this worker.
func (l *Ledger) Record(toolName string, call tool.Call, phase string) error {
	e := Entry{Worker: l.Worker, PID: os.Getpid(), Tool: toolName, Turn: call.TurnID, Call: call.CallID, Phase: phase, At: time.Now().UTC()}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.Path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open the ledger: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write the ledger: %w", err)
	}
	return f.Close()
}

// ReadLedger returns every entry written so far; a missing file is an
// empty ledger.
func ReadLedger(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("ledger line %q: %w", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

type noArgs struct{}

type slowArgs struct {
	Millis int `json:"ms" jsonschema:"how long to run, in milliseconds"`
}

// Tools are the test tools, recording their runs in l.
func Tools(l *Ledger) ([]tool.Tool, error) {
	big := func(name string) func(context.Context, tool.Call, noArgs) (results.Outcome, error) {
		return func(_ context.Context, call tool.Call, _ noArgs) (results.Outcome, error) {
			if err := l.Record(name, call, "start"); err != nil {
				return results.Outcome{}, tool.Retryable(err)
			}
			return results.SucceedText(Payload(call.TurnID, call.CallID)), nil
		}
	}
	bigOutput, err := tool.Func(tool.Spec{
		Name: BigOutput, Description: "Return a large output the model reads whole.",
		Idempotent: true, Concurrent: true,
		MaxOutputBytes: 2 * PayloadSize, MaxOutputLines: PayloadSize,
	}, big(BigOutput))
	if err != nil {
		return nil, err
	}
	bigRaw, err := tool.Func(tool.Spec{
		Name: BigRaw, Description: "Return a large output the model reads the start of.",
		Idempotent: true, Concurrent: true,
	}, big(BigRaw))
	if err != nil {
		return nil, err
	}
	slow, err := tool.Func(tool.Spec{
		Name: SlowOnce, Description: "Run once, slowly; never retried.",
		HeartbeatInterval: time.Second, Timeout: 2 * time.Minute,
	}, func(ctx context.Context, call tool.Call, args slowArgs) (results.Outcome, error) {
		if err := l.Record(SlowOnce, call, "start"); err != nil {
			return results.Outcome{}, err
		}
		select {
		case <-time.After(time.Duration(args.Millis) * time.Millisecond):
		case <-ctx.Done():
			return results.Outcome{}, ctx.Err()
		}
		if err := l.Record(SlowOnce, call, "end"); err != nil {
			return results.Outcome{}, err
		}
		return results.SucceedText("slow work done"), nil
	})
	if err != nil {
		return nil, err
	}
	commit, err := tool.Func(tool.Spec{
		Name: CommitOnce, Description: "Commit, once, after a person approves.",
		Approval: tool.ApprovalAlways, HeartbeatInterval: time.Second,
	}, func(_ context.Context, call tool.Call, _ noArgs) (results.Outcome, error) {
		if err := l.Record(CommitOnce, call, "start"); err != nil {
			return results.Outcome{}, err
		}
		return results.SucceedText("committed"), nil
	})
	if err != nil {
		return nil, err
	}
	return []tool.Tool{bigOutput, bigRaw, slow, commit}, nil
}
