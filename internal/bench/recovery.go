package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Benchmark 7, recovery after SIGKILL: each side's worker runs in a
// subprocess (this binary, re-executed) that the driver SIGKILLs while
// every workflow waits on a slow model call, then starts again. Tollgate's
// turns call a fake OpenAI-compatible model through the openai provider;
// the bare workflow runs one activity that makes the same slow HTTP call
// and heartbeats as CallModel does, with CallModel's timeouts and retry
// policy. Both sides use the same fake model, server, client and SDK
// worker options (the defaults, as the worker binary's).
const (
	// envRecovery names the side a recovery worker subprocess serves;
	// envRecoveryModel is the fake model's base URL for that side.
	envRecovery      = "TOLLGATE_BENCH_RECOVERY"
	envRecoveryModel = "TOLLGATE_BENCH_RECOVERY_MODEL"

	// RecoveryModelDelay is how long the fake model takes to answer.
	RecoveryModelDelay = 3 * time.Second
	// RecoveryGoal is the longest a turn may take from the restart to
	// completion: row 7b of the report passes below it.
	RecoveryGoal = 30 * time.Second

	bareSlowCallName = "BareSlowCall"
	bareSlowCall     = "BareSlowCallActivity"
)

// A recovery worker is started by the environment alone, so that neither
// main nor TestMain need to know of it: init turns the process into one
// before either runs.
func init() { runAs(envRecovery, "bench recovery worker", runRecoveryWorker) }

// runRecoveryWorker serves one side's queue until stdin closes (or the
// driver kills it, which is the point).
func runRecoveryWorker(side string) error {
	dataDir := os.Getenv(envData)
	c, err := Dial(os.Getenv(envAddress), dataDir)
	if err != nil {
		return err
	}
	defer c.Close()
	baseURL := os.Getenv(envRecoveryModel)
	var opts worker.Options
	if side == sideTollgate {
		// As the worker binary enables Tollgate, with the model at the
		// fake server.
		plugin, err := tollgate.NewPlugin(tollgate.Options{
			DataDir:    dataDir,
			Workspace:  workspaceDir(dataDir),
			Models:     providers.Config{OpenAIKey: "bench", OpenAIBaseURL: baseURL},
			NoBuiltins: true,
		})
		if err != nil {
			return err
		}
		opts.Plugins = []worker.Plugin{plugin}
	}
	w, err := startSide(c, side, opts, func(r worker.Registry) {
		r.RegisterWorkflowWithOptions(BareSlowCall, workflow.RegisterOptions{Name: bareSlowCallName})
		r.RegisterActivityWithOptions((&slowCaller{url: baseURL + "/chat/completions"}).call, activity.RegisterOptions{Name: bareSlowCall})
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// BareSlowCall runs one slow call with the options Tollgate's turn gives
// CallModel: a 5-minute start-to-close timeout, CallModel's heartbeat
// timeout and retry policy.
func BareSlowCall(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		HeartbeatTimeout:    activities.CallModelHeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    2 * time.Minute,
			MaximumAttempts:    10,
		},
	})
	var out string
	err := workflow.ExecuteActivity(ctx, bareSlowCall).Get(ctx, &out)
	return out, err
}

// slowCaller is the bare side's "model call": one HTTP request to the
// fake model, heartbeating every CallModelHeartbeatInterval meanwhile.
type slowCaller struct{ url string }

func (s *slowCaller) call(ctx context.Context) (string, error) {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(activities.CallModelHeartbeatInterval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(`{}`))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("model: %s", resp.Status)
	}
	return string(body), nil
}

// slowModel is the fake model: every request under /<side>/ waits delay,
// or until its client goes away, then gets a final Chat Completions text
// reply. It counts each side's requests.
type slowModel struct {
	*httptest.Server
	mu       sync.Mutex
	requests map[string]*atomic.Int64
}

const slowModelReply = `{"id":"chatcmpl-bench","object":"chat.completion","created":1741569952,"model":"bench-model",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"Recovered."},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`

func newSlowModel(delay time.Duration) *slowModel {
	m := &slowModel{requests: map[string]*atomic.Int64{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		side, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		m.count(side).Add(1)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return // the worker died mid-call
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, slowModelReply)
	}))
	return m
}

func (m *slowModel) count(side string) *atomic.Int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.requests[side]
	if n == nil {
		n = &atomic.Int64{}
		m.requests[side] = n
	}
	return n
}

// recoveryProc is a running recovery worker subprocess.
type recoveryProc struct {
	*subprocess
	once sync.Once
	mu   sync.Mutex
	log  bytes.Buffer // its stderr
}

func (p *recoveryProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Write(b)
}

// stderr is what the worker has logged so far.
func (p *recoveryProc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.TrimSpace(p.log.String())
}

func startRecoveryProc(side, address, dataDir, queue, modelURL string) (*recoveryProc, error) {
	p := &recoveryProc{}
	var err error
	p.subprocess, err = startSubprocess([]string{envRecovery + "=" + side, envRecoveryModel + "=" + modelURL,
		envAddress + "=" + address, envData + "=" + dataDir, envQueue + "=" + queue}, p, nil)
	if err != nil {
		return nil, fmt.Errorf("recovery worker %s: %w: %s", side, err, p.stderr())
	}
	return p, nil
}

// kill SIGKILLs the worker: no graceful stop, no cancelled activities, no
// goodbye to the server. Safe to call more than once.
func (p *recoveryProc) kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
}

// Recovery is benchmark 7: N workflows a side in their slow call when the
// worker process is SIGKILLed; for each, the time from the new worker's
// start to the workflow's close (the server's close time).
type Recovery struct {
	N              int
	Delay          time.Duration
	Tollgate, Bare []time.Duration
	// Calls is how many calls each side's model received in all.
	Calls [2]int64
}

// Recovery runs benchmark 7 with n workflows a side, both sides at once
// on their own task queues.
func (e *Env) Recovery(ctx context.Context, n int) (*Recovery, error) {
	model := newSlowModel(RecoveryModelDelay)
	defer model.Close()
	r := &Recovery{N: n, Delay: RecoveryModelDelay}
	sides := []string{sideTollgate, sideBare}
	got := make([][]time.Duration, len(sides))
	err := Pool(ctx, len(sides), len(sides), func(ctx context.Context, i int) error {
		var err error
		got[i], err = e.recoverSide(ctx, sides[i], n, model)
		if err != nil {
			return fmt.Errorf("%s: %w", sides[i], err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.Tollgate, r.Bare = got[0], got[1]
	r.Calls = [2]int64{model.count(sideTollgate).Load(), model.count(sideBare).Load()}
	return r, nil
}

func (e *Env) recoverSide(ctx context.Context, side string, n int, model *slowModel) ([]time.Duration, error) {
	queue := "bench-recovery-" + side
	modelURL := model.URL + "/" + side + "/v1"
	calls := model.count(side)
	before := calls.Load()
	first, err := startRecoveryProc(side, e.Server.Address(), e.DataDir, queue, modelURL)
	if err != nil {
		return nil, err
	}
	defer first.kill()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = id("recovery-" + side)
		opts := client.StartWorkflowOptions{ID: ids[i], TaskQueue: queue}
		if side == sideTollgate {
			in := Unique(workflows.Input{Prompt: "Say something", Model: "openai:bench-model"}, ids[i])
			_, err = e.Client.ExecuteWorkflow(ctx, opts, workflows.WorkflowName, in)
		} else {
			_, err = e.Client.ExecuteWorkflow(ctx, opts, bareSlowCallName)
		}
		if err != nil {
			return nil, err
		}
	}
	// Kill once every workflow's call has reached the model.
	deadline := time.Now().Add(time.Minute)
	for calls.Load()-before < int64(n) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d calls reached the model within a minute: %s", calls.Load()-before, n, first.stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	first.kill()
	restarted := time.Now()
	second, err := startRecoveryProc(side, e.Server.Address(), e.DataDir, queue, modelURL)
	if err != nil {
		return nil, err
	}
	defer second.kill()
	closed, err := closeTimes(ctx, e.Client, ids, side == sideTollgate, restarted.Add(3*time.Minute))
	if err != nil {
		return nil, fmt.Errorf("%w; worker log: %s", err, second.stderr())
	}
	took := make([]time.Duration, n)
	for i, t := range closed {
		took[i] = t.Sub(restarted)
	}
	return took, nil
}

// closeTimes waits for every workflow to complete and returns the close
// time the server recorded for each. It waits with result long polls, cut
// every few seconds so a missed close notification (see "Lost result
// notifications") costs nothing but a poll; the close time is exact
// either way.
func closeTimes(ctx context.Context, c client.Client, ids []string, turn bool, deadline time.Time) ([]time.Time, error) {
	closed := make([]time.Time, len(ids))
	err := Pool(ctx, len(ids), len(ids), func(ctx context.Context, i int) error {
		for {
			gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var res workflows.Result
			var out string
			var ptr any = &out
			if turn {
				ptr = &res
			}
			err := c.GetWorkflow(gctx, ids[i], "").Get(gctx, ptr)
			cancel()
			var failed *temporal.WorkflowExecutionError
			switch {
			case errors.As(err, &failed):
				return fmt.Errorf("%s failed: %w", ids[i], err)
			case err != nil && ctx.Err() == nil && time.Now().Before(deadline):
				continue
			case err != nil:
				return fmt.Errorf("%s did not complete: %w", ids[i], err)
			case turn && res.Status != workflows.StatusCompleted:
				return fmt.Errorf("turn %s ended %s: %s", ids[i], res.Status, res.Error)
			}
			d, err := c.DescribeWorkflowExecution(ctx, ids[i], "")
			if err != nil {
				return err
			}
			closed[i] = d.GetWorkflowExecutionInfo().GetCloseTime().AsTime()
			return nil
		}
	})
	return closed, err
}
