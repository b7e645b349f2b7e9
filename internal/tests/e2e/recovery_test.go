package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate/workflows"
)

// Sizes of the recovery test.
const (
	// recoveryTurns are in flight, each in its model call, when the worker
	// is killed.
	recoveryTurns = 20
	// recoveryModelDelay is how long the fake model takes to answer.
	recoveryModelDelay = 3 * time.Second
	// recoveryGoal is the longest a turn may take, from the new worker's
	// start, to finish (the bench report holds row 7b to the same goal).
	recoveryGoal = 30 * time.Second
	// recoveryDeadline is how long the test waits for the turns after the
	// restart before it fails: well past the goal, well short of the
	// 5-minute start-to-close timeout a model call without a heartbeat
	// timeout would wait out.
	recoveryDeadline = 60 * time.Second
)

// The worker process is SIGKILLed while every turn waits for its model
// call, and a new worker process starts: every turn completes, each
// within recoveryGoal of the restart. The heartbeat timeout on CallModel
// is what makes this fast: without it the server notices the lost worker
// only at the call's 5-minute start-to-close timeout.
//
// The worker is the real binary (`go build ./worker`), talking to the
// package's server and to a fake OpenAI-compatible model that takes
// recoveryModelDelay to answer.
func TestCrashRecoveryAfterSIGKILLDuringModelCalls(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the worker binary and runs it as a subprocess")
	}
	build := buildWorker(t)
	model := newSlowModel(t, recoveryModelDelay)
	e := newEnv(t, "recovery_sigkill")
	bin := build()

	first := startWorkerProcess(t, e, bin, "1", openAIAt(model.URL+"/v1")...)
	runs := make([]client.WorkflowRun, recoveryTurns)
	for i := range runs {
		runs[i] = e.start(workflows.Input{Prompt: fmt.Sprintf("Say something (%d)", i), Model: "openai:fake-model"})
	}
	reached := eventually(func() bool { return model.requests.Load() >= recoveryTurns })
	require.True(t, reached, "%d of %d turns' model calls reached the model within %s", model.requests.Load(), recoveryTurns, waitTimeout)

	first.kill(t)
	restarted := time.Now()
	startWorkerProcess(t, e, bin, "2", openAIAt(model.URL+"/v1")...)

	closed := waitClosed(t, e, runs, restarted.Add(recoveryDeadline))
	var took []time.Duration
	for i, run := range runs {
		res := e.result(run)
		require.Equal(t, workflows.StatusCompleted, res.Status, "turn %s: %s", run.GetID(), res.Error)
		require.Equal(t, "Recovered.", res.Text)
		took = append(took, closed[i].Sub(restarted))
	}
	slices.Sort(took)
	p50, worst := took[(len(took)-1)/2], took[len(took)-1]
	t.Logf("recovery after SIGKILL, %d turns in their model call: restart → completed p50 %s, max %s (model calls: %d)",
		len(took), p50.Round(100*time.Millisecond), worst.Round(100*time.Millisecond), model.requests.Load())
	require.Less(t, worst, recoveryGoal, "the slowest turn took %s from the restart to complete", worst)
}

// buildWorker starts building the worker binary from the module root and
// returns a function that waits for the build and returns the binary.
func buildWorker(t *testing.T) func() string {
	t.Helper()
	return buildProgram(t, "./worker")
}

// buildProgram starts building the program in pkg (a directory of the
// module, such as ./cmd/gateway) and returns a function that waits for
// the build and returns the binary.
func buildProgram(t *testing.T, pkg string) func() string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	type built struct {
		out []byte
		err error
	}
	done := make(chan built, 1)
	go func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		gomod := strings.TrimSpace(string(out))
		if err != nil || gomod == "" || gomod == os.DevNull {
			done <- built{out, fmt.Errorf("go env GOMOD: not inside a module (%q, %v)", gomod, err)}
			return
		}
		// A test's subprocess needs no symbol table or DWARF; leaving them
		// out halves the link of this large binary.
		build := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, pkg)
		build.Dir = filepath.Dir(gomod)
		out, err = build.CombinedOutput()
		done <- built{out, err}
	}()
	var once sync.Once
	var b built
	wait := func() { once.Do(func() { b = <-done }) }
	// A test that fails before it waits still lets the build finish
	// before its temporary directory goes.
	t.Cleanup(wait)
	return func() string {
		t.Helper()
		wait()
		require.NoError(t, b.err, "go build %s:\n%s", pkg, b.out)
		return bin
	}
}

// slowModel is a fake Chat Completions server: every request waits delay,
// or until its client goes away, then gets a final text reply.
type slowModel struct {
	*httptest.Server
	requests atomic.Int64
}

func newSlowModel(t *testing.T, delay time.Duration) *slowModel {
	t.Helper()
	m := &slowModel{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		m.requests.Add(1)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			// The worker died mid-call.
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-recovery","object":"chat.completion","created":1741569952,"model":"fake-model",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"Recovered."},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
	}))
	// Registered before the workers' cleanups, so it runs after them: a
	// handler still waiting returns when its worker is killed.
	t.Cleanup(m.Close)
	return m
}

// openAIAt is the environment that points a worker's openai: models at
// baseURL.
func openAIAt(baseURL string) []string {
	return []string{"OPENAI_BASE_URL=" + baseURL, "OPENAI_API_KEY=test"}
}

// workerProcess is a worker binary running as a subprocess.
type workerProcess struct {
	cmd    *exec.Cmd
	log    string
	killed bool
}

// startWorkerProcess starts the worker binary on the env's server, task
// queue, data directory and workspace, with extra environment (a model
// server, an MCP configuration). The process is killed when the test ends;
// its log is shown if the test failed.
func startWorkerProcess(t *testing.T, e *env, bin, name string, extraEnv ...string) *workerProcess {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "worker-"+name+".log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	defer logFile.Close()
	args := []string{
		"--address", e.hostPort, "--namespace", e.namespace, "--task-queue", e.tq,
		"--data", e.data, "--workspace", e.ws, "--log-level", "warn",
	}
	if runtime.GOOS == "linux" {
		// A test binary killed by its timeout takes the worker with it.
		args = append(args, "--die-with-parent")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(workerEnv(), extraEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	p := &workerProcess{cmd: cmd, log: logPath}
	t.Cleanup(func() {
		if !p.killed {
			p.killed = true
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("worker %s log:\n%s", name, b)
		}
	})
	return p
}

// kill SIGKILLs the worker: no graceful stop, no cancelled activities, no
// goodbye to the server.
func (p *workerProcess) kill(t *testing.T) {
	t.Helper()
	p.killed = true
	require.NoError(t, p.cmd.Process.Kill())
	_ = p.cmd.Wait()
}

// workerEnv is this process's environment without the settings that
// would point the worker elsewhere (another server, a real model, a
// configured workspace).
func workerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TEMPORAL_") || strings.HasPrefix(name, "TOLLGATE_") ||
			strings.HasPrefix(name, "OPENAI_") || strings.HasPrefix(name, "ANTHROPIC_") || strings.HasPrefix(name, "OLLAMA_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// waitClosed waits until every run has closed, or fails at deadline
// naming how many are still open, and returns each run's close time as
// the server recorded it.
func waitClosed(t *testing.T, e *env, runs []client.WorkflowRun, deadline time.Time) []time.Time {
	t.Helper()
	closed := make([]time.Time, len(runs))
	open := len(runs)
	for open > 0 {
		for i, run := range runs {
			if !closed[i].IsZero() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			d, err := e.caller.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
			cancel()
			if err != nil {
				continue
			}
			info := d.GetWorkflowExecutionInfo()
			if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && info.GetCloseTime() != nil {
				closed[i] = info.GetCloseTime().AsTime()
				open--
			}
		}
		if open > 0 {
			require.False(t, time.Now().After(deadline), "%d of %d turns still running %s after the restart",
				open, len(runs), recoveryDeadline)
			// The close time comes from the server, so polling more often
			// would only load the server the other tests share.
			time.Sleep(500 * time.Millisecond)
		}
	}
	return closed
}
