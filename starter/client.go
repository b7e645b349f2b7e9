package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/clientconfig"
	"github.com/tollgate-dev/tollgate/replay"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/blobstore"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/storage/payloadstore"
	"github.com/tollgate-dev/tollgate/workflows"
)

// turns is everything the commands ask of Temporal, in the contract's
// terms. The commands never touch client.Client directly, so the tests
// drive them against a fake and no server is needed; errors come back
// already sorted (rejectedError for a validator's no, sentences for the
// rest).
type turns interface {
	// Start starts an AgentTurn and returns its run id.
	Start(ctx context.Context, id, taskQueue string, in workflows.Input) (runID string, err error)
	// State runs the state Query.
	State(ctx context.Context, id, runID string) (workflows.State, error)
	// Respond sends the respond Update and waits for the call's new card.
	Respond(ctx context.Context, id, runID string, r workflows.Response) (results.Card, error)
	// Reevaluate sends the reevaluate Update: the turn's waiting calls
	// are decided again under the workers' current approval rules.
	Reevaluate(ctx context.Context, id, by string) (workflows.Reevaluation, error)
	// Signal sends the respond Signal.
	Signal(ctx context.Context, id, runID string, r workflows.Response) error
	// Cancel requests cancellation of the whole turn.
	Cancel(ctx context.Context, id, runID string) error
	// Result waits for the turn to end and returns what it returned.
	Result(ctx context.Context, id, runID string) (workflows.Result, error)
	// Export writes the run's history in the CLI's JSON format.
	Export(ctx context.Context, id, runID string, w io.Writer) error
	// Runs lists the runs of a turn that continued as new, oldest first.
	Runs(ctx context.Context, id string) ([]string, error)
	// Agents lists the named agents the workers of taskQueue offer.
	Agents(ctx context.Context, taskQueue string) ([]workflows.AgentInfo, error)
	Close()
}

// rpcTimeout bounds the calls a worker must answer (the state Query, the
// respond Update). Without a worker they would wait forever; after this
// long the command says so instead.
const rpcTimeout = 30 * time.Second

// temporalTurns is turns over a real client.
type temporalTurns struct {
	c                  client.Client
	address, namespace string
	// blobs names where this starter reads payloads stored outside
	// history, for errors about one it cannot find.
	blobs string
}

func dialTemporal(ctx context.Context, g globals) (turns, error) {
	opts, err := clientconfig.ClientOptions(clientconfig.Options{
		DataDir: g.dataDir, Profile: g.profile, Address: g.address, Namespace: g.namespace,
	})
	if err != nil {
		return nil, err
	}
	// The SDK logs every retry of an unreachable server at info level;
	// the error below says it once.
	opts.Logger = quietLogger{}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to Temporal at %s (namespace %s); is the server running (go run ./worker --dev starts one)? %w", opts.HostPort, opts.Namespace, err)
	}
	return &temporalTurns{c: c, address: opts.HostPort, namespace: opts.Namespace, blobs: blobsName(g.dataDir)}, nil
}

func (t *temporalTurns) Close() { t.c.Close() }

func (t *temporalTurns) Start(ctx context.Context, id, taskQueue string, in workflows.Input) (string, error) {
	// Without ErrorWhenAlreadyStarted the SDK would hand back the running
	// turn's run, and `run --id` would follow a turn it did not start.
	run, err := tollgate.Client{Temporal: t.c, TaskQueue: taskQueue}.StartWithOptions(ctx, tollgate.StartOptions{ID: id, ErrorWhenAlreadyStarted: true}, in)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return "", fmt.Errorf("a turn with id %s is already running; pick another --id", id)
		}
		return "", t.explain(err, id, "start the turn")
	}
	return run.GetRunID(), nil
}

func (t *temporalTurns) State(ctx context.Context, id, runID string) (workflows.State, error) {
	qctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	s, err := tollgate.Client{Temporal: t.c}.StateWithOptions(qctx, tollgate.StateOptions{TurnID: id, RunID: runID})
	if err != nil {
		var deadline *serviceerror.DeadlineExceeded
		if ctx.Err() == nil && (qctx.Err() != nil || errors.As(err, &deadline)) {
			return workflows.State{}, fmt.Errorf("no worker answered the state query of %s in time; is a worker running on its task queue (or restarting)?", id)
		}
		return workflows.State{}, t.explain(err, id, "query the state")
	}
	return s, nil
}

func (t *temporalTurns) Respond(ctx context.Context, id, runID string, r workflows.Response) (results.Card, error) {
	uctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	card, err := tollgate.Client{Temporal: t.c}.RespondWithOptions(uctx, tollgate.RespondOptions{TurnID: id, RunID: runID}, r)
	if err != nil {
		return results.Card{}, t.explainUpdate(ctx, uctx, err, id)
	}
	return card, nil
}

func (t *temporalTurns) Reevaluate(ctx context.Context, id, by string) (workflows.Reevaluation, error) {
	uctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	out, err := tollgate.Client{Temporal: t.c}.Reevaluate(uctx, id, by)
	if err != nil {
		return workflows.Reevaluation{}, t.explainUpdate(ctx, uctx, err, id)
	}
	return out, nil
}

// explainUpdate sorts an Update's failure: a refusal (the validator's
// sentence, or a turn that has ended) is a rejectedError; a worker that
// never answered is said plainly.
func (t *temporalTurns) explainUpdate(ctx, uctx context.Context, err error, id string) error {
	var rej *tollgate.RejectedError
	if errors.As(err, &rej) {
		return &rejectedError{msg: rej.Reason}
	}
	var timeout *client.WorkflowUpdateServiceTimeoutOrCanceledError
	if ctx.Err() == nil && (uctx.Err() != nil || errors.As(err, &timeout)) {
		return fmt.Errorf("no worker accepted the respond update for %s within %s; is a worker running on its task queue?", id, rpcTimeout)
	}
	return t.explain(err, id, "send the respond update")
}

func (t *temporalTurns) Signal(ctx context.Context, id, runID string, r workflows.Response) error {
	if err := (tollgate.Client{Temporal: t.c}).SignalWithOptions(ctx, tollgate.SignalOptions{TurnID: id, RunID: runID}, r); err != nil {
		return t.explain(err, id, "send the respond signal")
	}
	return nil
}

func (t *temporalTurns) Cancel(ctx context.Context, id, runID string) error {
	// The server accepts a cancel request for a turn that has already
	// ended and does nothing; say so instead of claiming success.
	d, err := t.c.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		return t.explain(err, id, "cancel the turn")
	}
	if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("the turn %s has already ended (%s); there is nothing to cancel", id, strings.ToLower(strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_")))
	}
	if err := t.c.CancelWorkflow(ctx, id, runID); err != nil {
		return t.explain(err, id, "cancel the turn")
	}
	return nil
}

func (t *temporalTurns) Result(ctx context.Context, id, runID string) (workflows.Result, error) {
	var res workflows.Result
	if err := t.c.GetWorkflow(ctx, id, runID).Get(ctx, &res); err != nil {
		var wee *temporal.WorkflowExecutionError
		if errors.As(err, &wee) {
			return res, fmt.Errorf("the turn %s ended without a result: %s", id, failureMessage(err))
		}
		return res, t.explain(err, id, "wait for the result")
	}
	return res, nil
}

func (t *temporalTurns) Runs(ctx context.Context, id string) ([]string, error) {
	runs, err := replay.Runs(ctx, t.c, id)
	if err != nil {
		return nil, t.explain(err, id, "list the runs")
	}
	return runs, nil
}

func (t *temporalTurns) Export(ctx context.Context, id, runID string, w io.Writer) error {
	if err := replay.Export(ctx, t.c, id, runID, w); err != nil {
		return t.explain(err, id, "export the history")
	}
	return nil
}

// explain turns the errors a person can act on into sentences and keeps
// the original wrapped for errors.Is/As.
func (t *temporalTurns) explain(err error, id, doing string) error {
	if err == nil {
		return nil
	}
	var nf *serviceerror.NotFound
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%w (%s)", errInterrupted, doing)
	case errors.As(err, &nf) && strings.Contains(nf.Error(), "already completed"):
		return fmt.Errorf("cannot %s: the turn %s has already ended: %w", doing, id, err)
	case errors.As(err, &nf):
		return fmt.Errorf("no turn %s in namespace %s at %s: %w", id, t.namespace, t.address, err)
	case status.Code(err) == codes.Unavailable || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("cannot reach Temporal at %s to %s: %w", t.address, doing, err)
	case errors.Is(err, blobstore.ErrMissing):
		return fmt.Errorf("cannot %s %s: the worker stored part of it (a payload of %d KiB or more) outside history, and %s does not hold it; "+
			"run the starter with the worker's --data (TOLLGATE_DATA), or give the worker and the starter the same %s: %w",
			doing, id, payloadstore.Threshold>>10, t.blobs, blobstore.EnvVar, err)
	}
	return fmt.Errorf("%s %s: %w", doing, id, err)
}

// blobsName says which store the client of dataDir reads payloads from,
// as tollgate.NewClientPlugin chooses it.
func blobsName(dataDir string) string {
	if blobstore.URLFromEnv(os.Getenv) != "" {
		return "the blob store " + blobstore.EnvVar + " names"
	}
	if dataDir == "" {
		dataDir = datadir.FromEnv(os.Getenv)
	}
	return "this starter's data directory " + dataDir
}

// failureMessage is the innermost application message of a workflow
// failure ("invalid turn input: ..."), without the SDK's type and
// retryable decorations.
func failureMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return "cancelled"
	}
	var term *temporal.TerminatedError
	if errors.As(err, &term) {
		return "terminated"
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		return "timed out"
	}
	return err.Error()
}

// quietLogger drops the SDK's logs: a command-line client reports its own
// errors, once, in sentences.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}

func (t *temporalTurns) Agents(ctx context.Context, taskQueue string) ([]workflows.AgentInfo, error) {
	qctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	agents, err := tollgate.Client{Temporal: t.c, TaskQueue: taskQueue}.Agents(qctx)
	if err != nil && qctx.Err() != nil {
		return nil, fmt.Errorf("no worker on task queue %s answered within %s; is one running (go run ./worker --dev)?", taskQueue, rpcTimeout)
	}
	return agents, err
}
