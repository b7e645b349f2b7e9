package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// enableVar turns the cluster test on; make test-cluster sets it.
const enableVar = "TOLLGATE_CLUSTER"

func TestMain(m *testing.M) {
	if os.Getenv(enableVar) == "" {
		// Printed, not only skipped: go test ./... hides skip messages.
		fmt.Fprintln(os.Stderr, "internal/tests/cluster: the cluster test (PostgreSQL, the Temporal server binary, SeaweedFS, NATS, two workers, two gateways) runs only under make test-cluster; skipped")
	}
	os.Exit(m.Run())
}

const (
	turns = 20
	// slowMillis is how long slow_once runs: long enough that a worker is
	// killed while some of its calls are in flight.
	slowMillis = 6000
	namespace  = "default"
	taskQueue  = "tollgate"
)

// script is what the scripted model plays in every turn: three large or
// slow tools at once, then a commit that needs approval, then the end.
const script = `{"replies": [
  {"text": "Gathering.", "tool_calls": [
     {"id": "big", "name": "big_output"},
     {"id": "raw", "name": "big_raw"},
     {"id": "slow", "name": "slow_once", "arguments": {"ms": %d}}],
   "expect": {"last_role": "user", "tool_results": 0}},
  {"text": "Committing.", "tool_calls": [{"id": "commit", "name": "commit_once"}],
   "expect": {"last_role": "tool", "tool_results": 3}},
  {"text": "done", "expect": {"last_role": "tool", "tool_results": 1}}
]}`

// TestCluster runs Tollgate as it runs in production: PostgreSQL, the
// real Temporal server binary with its schema set up by
// temporal-sql-tool, an S3 store (SeaweedFS) for payloads and transcripts,
// and two worker processes that share nothing but the server and the
// bucket. It kills a worker in the middle of a tool and the server while
// turns are parked, and checks that no turn is lost, no non-idempotent
// tool runs twice, and every large payload can be read from either
// worker's side and replayed. A nats-server carries live events from the
// workers to two gateways (live_test.go).
func TestCluster(t *testing.T) {
	if os.Getenv(enableVar) == "" {
		t.Skip("run with make test-cluster")
	}
	began := time.Now()
	bin := binDir()
	for _, name := range []string{"temporal-server", "temporal-sql-tool", "temporal", "weed", "nats-server"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			prerequisite(t, "%s is not built in %s (make test-cluster builds it with internal/tests/cluster/bins.sh)", name, bin)
		}
	}
	moduleDir := temporalModuleDir(t)
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	scriptsDir := filepath.Join(root, "deploy", "temporal", "scripts")
	logDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	pathEnv := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")

	// Our own programs, built from this tree.
	progs := t.TempDir()
	run(t, ctx, nil, "go", "build", "-o", progs, "../../../cmd/clusterworker", "../../../starter", "../../../cmd/healthcheck", "../../../cmd/gateway")
	t.Logf("built the worker, the starter and the gateway in %s", time.Since(began).Round(time.Second))

	// PostgreSQL, then the schema, with the script compose runs.
	phase := time.Now()
	pg := startPostgres(t, logDir)
	run(t, ctx, []string{pathEnv, "POSTGRES_HOST=127.0.0.1", fmt.Sprintf("POSTGRES_PORT=%d", pg.port),
		"POSTGRES_USER=temporal", "SQL_PASSWORD=temporal",
		"SCHEMA_DIR=" + filepath.Join(moduleDir, "schema", "postgresql", "v12")},
		"sh", filepath.Join(scriptsDir, "setup-postgres.sh"))
	t.Logf("PostgreSQL on :%d with the Temporal schema in %s", pg.port, time.Since(phase).Round(time.Second))

	// The server, then the namespace and search attributes, again with
	// compose's script.
	phase = time.Now()
	srv := newTemporalServer(t, logDir, filepath.Join(bin, "temporal-server"), pg,
		filepath.Join(root, "deploy", "temporal", "dynamicconfig", "development-sql.yaml"))
	srv.start()
	run(t, ctx, []string{pathEnv, "TEMPORAL_ADDRESS=" + srv.address, "DEFAULT_NAMESPACE=" + namespace},
		"sh", filepath.Join(scriptsDir, "create-namespace.sh"))
	t.Logf("Temporal server at %s, namespace and search attributes registered in %s", srv.address, time.Since(phase).Round(time.Second))

	phase = time.Now()
	sw := startSeaweed(t, logDir, filepath.Join(bin, "weed"))
	t.Logf("SeaweedFS S3 at %s in %s", sw.endpoint, time.Since(phase).Round(time.Second))

	// NATS with JetStream, for live events: workers publish to it, the
	// gateways read from it.
	natsURL := startNATS(t, logDir, filepath.Join(bin, "nats-server"))
	t.Logf("nats-server at %s", natsURL)

	// Two workers with disks of their own; only the bucket is shared.
	work := t.TempDir()
	ledgerPath := filepath.Join(work, "ledger.jsonl")
	scripts := filepath.Join(work, "scripts")
	require.NoError(t, os.MkdirAll(scripts, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(scripts, "cluster.json"), []byte(fmt.Sprintf(script, slowMillis)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(scripts, "live.json"), []byte(fmt.Sprintf(liveScript, liveReply)), 0o644))
	common := append([]string{
		"TEMPORAL_ADDRESS=" + srv.address, "TEMPORAL_NAMESPACE=" + namespace, "TOLLGATE_TASK_QUEUE=" + taskQueue, "TOLLGATE_NATS_URL=" + natsURL,
	}, sw.env()...)
	workers := map[string]*workerProc{}
	for _, name := range []string{"a", "b"} {
		w := &workerProc{name: name, data: filepath.Join(work, name, "data"), logDir: logDir, bin: filepath.Join(progs, "clusterworker")}
		w.env = append(append([]string{}, common...),
			"TOLLGATE_DATA="+w.data, "TOLLGATE_WORKSPACE="+filepath.Join(work, name, "workspace"),
			"TOLLGATE_SCRIPTS_DIR="+scripts, "CLUSTER_LEDGER="+ledgerPath, "CLUSTER_WORKER="+name)
		require.NoError(t, os.MkdirAll(filepath.Join(work, name, "workspace"), 0o755))
		w.start(t)
		workers[name] = w
	}

	// The compose file's worker health check sees a worker on this host
	// polling, and fails for a queue nobody polls.
	waitFor(t, time.Minute, "the health check to pass", func() bool {
		healthy := exec.Command(filepath.Join(progs, "healthcheck"))
		healthy.Env = append(os.Environ(), common...)
		return healthy.Run() == nil
	})
	unhealthy := exec.Command(filepath.Join(progs, "healthcheck"))
	unhealthy.Env = append(append(os.Environ(), common...), "TOLLGATE_TASK_QUEUE=nobody-polls-this")
	out, err := unhealthy.CombinedOutput()
	require.Error(t, err, "the health check fails for a queue with no worker: %s", out)

	// The test's own client is a third machine: a data directory of its
	// own, the same bucket.
	for _, kv := range sw.env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	plugin, err := tollgate.NewClientPlugin(filepath.Join(work, "client", "data"))
	require.NoError(t, err)
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.address, Namespace: namespace, Plugins: []client.Plugin{plugin}})
	require.NoError(t, err)
	defer c.Close()
	missing, err := tollgate.MissingSearchAttributes(ctx, c, namespace)
	require.NoError(t, err)
	require.Empty(t, missing, "create-namespace.sh registered every search attribute")
	tc := tollgate.Client{Temporal: c, TaskQueue: taskQueue}

	// 20 turns, spread over both workers.
	phase = time.Now()
	ids := make([]string, turns)
	for i := range ids {
		ids[i] = fmt.Sprintf("cluster-%02d", i+1)
		_, err := tc.Start(ctx, ids[i], workflows.Input{
			Prompt: fmt.Sprintf("Turn %d: gather, then commit.", i+1), Model: "scripted:cluster.json",
			Tools: ToolNames, MaxSteps: 6,
		})
		require.NoError(t, err)
	}

	// SIGKILL the worker with the most slow_once calls in flight.
	var victim string
	var inFlight []string
	waitFor(t, 3*time.Minute, "a worker with slow_once calls in flight", func() bool {
		entries := mustLedger(t, ledgerPath)
		byWorker := runningSlow(entries)
		for name, turns := range byWorker {
			if len(turns) > len(inFlight) {
				victim, inFlight = name, turns
			}
		}
		return len(inFlight) > 0
	})
	killedPID := workers[victim].proc.cmd.Process.Pid
	workers[victim].proc.kill()
	killedAt := time.Now()
	t.Logf("SIGKILLed worker %s with slow_once in flight for %d turns: %v", victim, len(inFlight), inFlight)
	// It comes back on the same disk a little later, as a restarted
	// machine would.
	time.Sleep(2 * time.Second)
	workers[victim].start(t)

	// Every turn parks on its commit.
	waitFor(t, 4*time.Minute, "every turn waiting for approval of commit", func() bool {
		for _, id := range ids {
			st, err := tc.State(ctx, id)
			if err != nil || st.Status != workflows.StatusWaiting {
				return false
			}
		}
		return true
	})
	t.Logf("all %d turns parked %s after the kill (%s since the first start)", turns, time.Since(killedAt).Round(time.Second), time.Since(phase).Round(time.Second))

	// SIGKILL the server while they are parked; start it again.
	srv.proc.kill()
	t.Logf("SIGKILLed the Temporal server")
	time.Sleep(2 * time.Second)
	restarted := time.Now()
	srv.start()

	// Approve every commit; the server may still be finding its shards,
	// so a refusal that is not a rejection is retried.
	for _, id := range ids {
		waitFor(t, 3*time.Minute, "approval of "+id, func() bool {
			rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
			defer rcancel()
			_, err := tc.Respond(rctx, id, workflows.Response{CallID: "commit", Decision: results.DecisionApprove, By: "cluster-test"})
			var rej *tollgate.RejectedError
			if errors.As(err, &rej) {
				t.Fatalf("approval of %s rejected: %v", id, err)
			}
			return err == nil
		})
	}
	t.Logf("approved all %d commits, starting %s after the server restart", turns, time.Since(restarted).Round(time.Second))

	// Every turn completes.
	final := map[string]workflows.Result{}
	for _, id := range ids {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Minute)
		res, err := tc.Result(rctx, id)
		rcancel()
		require.NoError(t, err, "result of %s", id)
		final[id] = res
	}
	lost := 0
	for _, id := range ids {
		if final[id].Status != workflows.StatusCompleted || final[id].Text != "done" {
			lost++
			t.Errorf("turn %s ended %s with %q", id, final[id].Status, final[id].Text)
		}
	}

	// Live events: a turn started on one gateway streams, from whichever
	// worker runs it, to a watcher on the other gateway.
	phase = time.Now()
	live := checkLiveEvents(t, ctx, logDir, work, filepath.Join(progs, "gateway"), common, srv.address)
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	liveRes, err := tc.Result(rctx, liveTurn)
	rcancel()
	require.NoError(t, err, "result of %s", liveTurn)
	require.Equal(t, liveRes.Text, live.reply, "the streamed deltas add up to the text of the turn's result")
	t.Logf("a watcher on gateway-b read %s's reply in %d text deltas, started on gateway-a, in %s", liveTurn, live.deltas, time.Since(phase).Round(time.Second))

	// No non-idempotent tool ran twice; the calls the kill interrupted
	// say their outcome is unknown. The ledger read at the kill is only a
	// lower bound of what was in flight: the server may have handed the
	// killed process a slow_once task it died before recording. So an
	// outcome-unknown call is judged by the whole ledger: it never
	// returned anywhere, and any run of it was in the killed process.
	entries := mustLedger(t, ledgerPath)
	starts := map[string]int{}
	ended := map[string]bool{}
	elsewhere := map[string]bool{}
	writer := map[string]string{}
	for _, e := range entries {
		key := e.Tool + " " + e.Turn
		switch e.Phase {
		case "start":
			starts[key]++
			writer[key] = e.Worker
			if e.PID != killedPID {
				elsewhere[key] = true
			}
		case "end":
			ended[key] = true
		}
	}
	unknown, twice := 0, 0
	for _, id := range ids {
		card := cardOf(t, final[id], "slow")
		slowUnknown := card.State == results.StateFailed && card.Failure != nil && card.Failure.Reason == results.FailureOutcomeUnknown
		for _, name := range []string{SlowOnce, CommitOnce} {
			key := name + " " + id
			n := starts[key]
			switch {
			case n > 1:
				twice++
				t.Errorf("%s ran %d times in %s, want at most once", name, n, id)
			case name == SlowOnce && slowUnknown:
				if ended[key] || elsewhere[key] {
					t.Errorf("%s in %s ends outcome unknown but ran outside the killed worker (runs %d, returned %v)", name, id, n, ended[key])
				}
			case n != 1:
				t.Errorf("%s ran %d times in %s, want once", name, n, id)
			}
		}
		if slowUnknown {
			unknown++
		}
	}
	require.GreaterOrEqual(t, unknown, len(inFlight), "every slow_once call seen in flight on the killed worker ends outcome unknown")
	t.Logf("%d slow_once calls ended outcome unknown (%d seen in flight at the kill)", unknown, len(inFlight))
	perWorker := map[string]int{}
	for _, e := range entries {
		if e.Phase == "start" {
			perWorker[e.Worker]++
		}
	}
	t.Logf("tool runs per worker: %v", perWorker)
	require.Len(t, perWorker, 2, "tools ran on both workers")

	// Every large payload, read from each worker's side (its data
	// directory, the shared bucket) by the starter, and by this client.
	phase = time.Now()
	starterEnv := func(w *workerProc) []string {
		return append(append([]string{}, common...), "TOLLGATE_DATA="+w.data)
	}
	starter := filepath.Join(progs, "starter")
	reads, crossReads := 0, 0
	for _, id := range ids {
		for _, call := range []string{"big", "raw"} {
			want := Digest(Payload(id, call))
			tool := map[string]string{"big": BigOutput, "raw": BigRaw}[call]
			if call == "big" {
				require.Equal(t, want, Digest(textOf(cardOf(t, final[id], call))), "%s %s as this client reads it", id, call)
			} else {
				require.NotEmpty(t, cardOf(t, final[id], call).Output.RawRef, "%s: the raw output of big_raw is kept in the output store", id)
			}
			for _, name := range []string{"a", "b"} {
				out := output(t, ctx, starterEnv(workers[name]), starter, "raw", id, call)
				require.Equal(t, want, Digest(out), "%s %s read from worker %s's side", id, call, name)
				reads++
				if writer[tool+" "+id] != name {
					crossReads++
				}
			}
		}
	}

	// Histories exported from one worker's side replay on the other's.
	histories := t.TempDir()
	for _, id := range ids {
		run(t, ctx, starterEnv(workers["a"]), starter, "history", "-o", filepath.Join(histories, id+".json"), id)
	}
	// The histories hold claims on the bucket, not the payloads: each is
	// smaller than one of its outputs.
	for _, id := range ids {
		desc, err := c.DescribeWorkflowExecution(ctx, id, "")
		require.NoError(t, err)
		size := desc.GetWorkflowExecutionInfo().GetHistorySizeBytes()
		require.Less(t, size, int64(PayloadSize), "%s: a %d-byte history holds a 200 KiB output inline, not in the bucket", id, size)
	}
	replayed := run(t, ctx, starterEnv(workers["b"]), starter, "replay", histories)
	require.Contains(t, replayed, fmt.Sprintf("%d of %d replayed cleanly", turns, turns), replayed)
	t.Logf("payload reads in %s", time.Since(phase).Round(time.Second))

	summary := fmt.Sprintf("cluster: %d turns, %d lost, %d non-idempotent runs twice; killed worker %s mid-tool (%d slow_once in flight, %d ended outcome unknown) and the Temporal server while %d turns were parked; %d payload reads of 200 KiB from both workers' sides (%d on the side that did not write them), %d histories replayed from the other worker's side; a turn started on one gateway streamed %d text deltas through nats-server to a watcher on the other; %s in all",
		turns, lost, twice, victim, len(inFlight), unknown, turns, reads, crossReads, turns, live.deltas, time.Since(began).Round(time.Second))
	t.Log(summary)
	fmt.Println(summary)
	require.Zero(t, lost)
	require.Zero(t, twice)
}

// workerProc is one clusterworker: its disk survives its restarts.
type workerProc struct {
	name   string
	data   string
	env    []string
	logDir string
	bin    string
	starts int
	proc   *proc
}

func (w *workerProc) start(t *testing.T) {
	t.Helper()
	w.starts++
	w.proc = startProc(t, w.logDir, fmt.Sprintf("worker-%s-%d", w.name, w.starts), w.env, nil, w.bin)
	w.proc.waitLog(t, "ready", 60*time.Second)
}

// runningSlow is, per worker, the turns whose slow_once has started and
// not ended.
func runningSlow(entries []Entry) map[string][]string {
	started := map[string]string{}
	for _, e := range entries {
		if e.Tool != SlowOnce {
			continue
		}
		switch e.Phase {
		case "start":
			started[e.Turn] = e.Worker
		case "end":
			delete(started, e.Turn)
		}
	}
	out := map[string][]string{}
	for turn, w := range started {
		out[w] = append(out[w], turn)
	}
	for _, turns := range out {
		sort.Strings(turns)
	}
	return out
}

func mustLedger(t *testing.T, path string) []Entry {
	t.Helper()
	entries, err := ReadLedger(path)
	require.NoError(t, err)
	return entries
}

func cardOf(t *testing.T, res workflows.Result, callID string) results.Card {
	t.Helper()
	for _, c := range res.Cards {
		if c.CallID == callID {
			return c
		}
	}
	t.Fatalf("no card %s", callID)
	return results.Card{}
}

func textOf(c results.Card) string {
	if c.Output == nil {
		return ""
	}
	var s strings.Builder
	for _, p := range c.Output.Parts {
		s.WriteString(p.Text)
	}
	return s.String()
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// temporalModuleDir is the pinned Temporal server module in the module
// cache, whose schema the setup script applies.
func temporalModuleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/server").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}
