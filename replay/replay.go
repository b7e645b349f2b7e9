// Package replay exports AgentTurn histories and replays them against the
// workflow code in this build. The file format is the one
// `temporal workflow show --output json` writes, so histories exported by
// the starter, by the official CLI or from the Temporal UI are
// interchangeable. Replaying is how a workflow change proves it still
// resumes the turns already parked in production.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/storage/blobstore"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/storage/payloadstore"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Options configure a replay.
type Options struct {
	// DataDir is the data directory whose payload store holds the payloads
	// the history refers to (externally stored ones are only references in
	// the history). Empty means TOLLGATE_DATA or the default.
	DataDir string
	// BlobURL is the blob store the workers keep payloads in; empty means
	// TOLLGATE_BLOB_URL, then DataDir's store.
	BlobURL string
	// Logger receives the replayer's own logs; nil discards them.
	Logger log.Logger
	// Codec decrypts an encrypted history's payloads (a *codec.Keyring);
	// nil reads the keys file TOLLGATE_CODEC_KEYS_FILE names, if set.
	Codec converter.PayloadCodec
}

// FileResult is the outcome of replaying one file.
type FileResult struct {
	Path string
	// Events is the number of events read; zero when the file did not load.
	Events int
	// Err is nil when the history replayed cleanly. Otherwise it says why:
	// the file did not load, or the code no longer produces the recorded
	// commands (the SDK's nondeterminism message).
	Err error `json:"-"`
}

// OK reports whether the file replayed cleanly.
func (r FileResult) OK() bool { return r.Err == nil }

// MarshalJSON writes {"file","events","ok","error"} for scripts.
func (r FileResult) MarshalJSON() ([]byte, error) {
	v := struct {
		Path   string `json:"file"`
		Events int    `json:"events"`
		OK     bool   `json:"ok"`
		Error  string `json:"error,omitempty"`
	}{Path: r.Path, Events: r.Events, OK: r.OK()}
	if r.Err != nil {
		v.Error = r.Err.Error()
	}
	return json.Marshal(v)
}

// Files replays every history in paths, one result per file, in order.
// A directory stands for the *.json files directly inside it, sorted by
// name, so a replay corpus can be named by its folder. One bad file does
// not stop the others: callers want the full list of what broke.
func Files(ctx context.Context, paths []string, opts Options) []FileResult {
	var out []FileResult
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			out = append(out, FileResult{Path: p, Err: err})
			continue
		}
		for _, f := range files {
			if err := ctx.Err(); err != nil {
				out = append(out, FileResult{Path: f, Err: fmt.Errorf("not replayed: %w", err)})
				continue
			}
			out = append(out, File(f, opts))
		}
	}
	return out
}

// File replays one history file.
func File(path string, opts Options) FileResult {
	res := FileResult{Path: path}
	f, err := os.Open(path)
	if err != nil {
		res.Err = fmt.Errorf("open history: %w", err)
		return res
	}
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		res.Err = fmt.Errorf("%s is not a history in the format `temporal workflow show --output json` writes: %w", path, err)
		return res
	}
	res.Events = len(h.GetEvents())
	res.Err = History(h, opts)
	return res
}

// History replays one loaded history.
func History(h *historypb.History, opts Options) error {
	if len(h.GetEvents()) == 0 {
		return errors.New("the history has no events")
	}
	started := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	if t := started.GetWorkflowType().GetName(); t != "" && t != workflows.WorkflowName && t != workflows.SessionWorkflowName {
		// The SDK would say "unable to find workflow type"; say what to do.
		return fmt.Errorf("the history is of workflow type %q; only %s and %s histories replay here", t, workflows.WorkflowName, workflows.SessionWorkflowName)
	}
	dataDir := opts.DataDir
	if dataDir == "" {
		dataDir = datadir.FromEnv(os.Getenv)
	}
	blobURL := opts.BlobURL
	if blobURL == "" {
		blobURL = blobstore.URLFromEnv(os.Getenv)
	}
	blobs, err := blobstore.Open(context.Background(), blobstore.Options{URL: blobURL, DataDir: dataDir})
	if err != nil {
		return fmt.Errorf("open the payload store: %w", err)
	}
	defer blobs.Close()
	ro := worker.WorkflowReplayerOptions{ExternalStorage: payloadstore.NewDriver(blobs).Storage()}
	if err := withCodec(&ro, h, opts); err != nil {
		return err
	}
	// A replayer per history: a failure in one cannot leave state behind
	// that colours the next.
	r, err := worker.NewWorkflowReplayerWithOptions(ro)
	if err != nil {
		return fmt.Errorf("create replayer: %w", err)
	}
	r.RegisterWorkflowWithOptions(workflows.AgentTurn, workflow.RegisterOptions{Name: workflows.WorkflowName})
	r.RegisterWorkflowWithOptions(workflows.AgentSession, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
	logger := opts.Logger
	if logger == nil {
		// The SDK's default logger would print the panic stack of every
		// nondeterministic history; the returned error already says it.
		logger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	}
	// The recorded workflow id, where the history names it: a session
	// names its turns after its own id, which the SDK's replayer would
	// otherwise replace with a placeholder.
	original := workflow.Execution{ID: started.GetWorkflowId()}
	if err := r.ReplayWorkflowHistoryWithOptions(logger, withoutInflightTask(h), worker.ReplayWorkflowHistoryOptions{OriginalExecution: original}); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

// withoutInflightTask drops a trailing WorkflowTaskStarted event. A
// history exported while a worker held a workflow task ends with one, and
// the SDK replayer (v1.50) then treats the task before it as the live one
// and skips comparing its commands: a nondeterministic change would pass.
// The started-but-uncompleted task has produced no commands yet, so
// without it the history says exactly what it said when the task was
// scheduled, and every recorded command is checked.
func withoutInflightTask(h *historypb.History) *historypb.History {
	ev := h.GetEvents()
	if len(ev) <= 3 || ev[len(ev)-1].GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED {
		return h
	}
	return &historypb.History{Events: ev[:len(ev)-1]}
}

// expand turns a directory into the *.json files inside it.
func expand(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, fmt.Errorf("read directory of histories: %w", err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			files = append(files, filepath.Join(p, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("directory %s holds no *.json histories", p)
	}
	sort.Strings(files)
	return files, nil
}

// Export writes the full history of one run, exactly as
// `temporal workflow show --output json` does: protojson of the whole
// history.v1.History message ({"events": [...]}) through the API's
// temporalproto marshaller, two-space indent, no payload shorthand (the
// SDK replayers cannot read shorthand), a trailing newline. Externally
// stored payloads stay references, as they are in the server's history.
// An empty runID means the latest run.
func Export(ctx context.Context, c client.Client, workflowID, runID string, w io.Writer) error {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return fmt.Errorf("read history of %s: %w", workflowID, err)
		}
		h.Events = append(h.Events, e)
	}
	return Write(w, h)
}

// Runs lists the run ids of a turn that continued as new, oldest first:
// from the chain's first run, each run's continue-as-new event names the
// next. A turn that never continued has one run.
func Runs(ctx context.Context, c client.Client, workflowID string) ([]string, error) {
	d, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", workflowID, err)
	}
	info := d.GetWorkflowExecutionInfo()
	run := info.GetFirstRunId()
	if run == "" {
		return []string{info.GetExecution().GetRunId()}, nil
	}
	var runs []string
	for run != "" {
		runs = append(runs, run)
		it := c.GetWorkflowHistory(ctx, workflowID, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		next := ""
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("read how run %s of %s ended: %w", run, workflowID, err)
			}
			next = e.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
		run = next
	}
	return runs, nil
}

// Write encodes h the way Export does; recorders that already hold a
// history use it to write corpus files.
func Write(w io.Writer, h *historypb.History) error {
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode history: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}
