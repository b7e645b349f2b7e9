package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tollgate-dev/tollgate/results"
)

// Resume is what a person answered to an earlier run's interrupt or
// connection request; the tool runs again with it.
type Resume struct {
	Decision results.DecisionKind `json:"decision"`
	// Answer is the chosen option id or the answer to a question, as JSON.
	Answer json.RawMessage `json:"answer,omitempty"`
	By     string          `json:"by,omitempty"`
}

// Call is one invocation of a tool.
type Call struct {
	TurnID    string
	CallID    string
	Arguments json.RawMessage
	// Resume is nil on the first run.
	Resume *Resume
	// Workspace is the directory file and shell tools are confined to;
	// WorkDir is the current working directory inside it.
	Workspace string
	WorkDir   string
	// User owns the turn; connections are looked up for this user.
	User string
	// Execution names the turn's chain of runs (its first run's id): it
	// stays the same when a long turn continues as new, and differs for a
	// new turn started later under the same turn id. A tool that keeps
	// state between the runs of a call keys it by Execution, TurnID and
	// CallID. Empty outside Tollgate's activities.
	Execution string
}

// Tool is something the model can call.
type Tool interface {
	Spec() Spec
	// Run does the work. A failure the model should see is a tool_error
	// outcome, not an error. A returned error is an internal error; wrap it
	// with Retryable to ask for a retry when the tool is idempotent.
	Run(ctx context.Context, call Call) (results.Outcome, error)
}

type retryableError struct{ err error }

func (e retryableError) Error() string { return e.err.Error() }
func (e retryableError) Unwrap() error { return e.err }

// Retryable marks a transient failure (a network blip) that an idempotent
// tool may be retried after. For a non-idempotent tool it is an internal
// error like any other.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return retryableError{err}
}

// IsRetryable reports whether err was marked with Retryable.
func IsRetryable(err error) bool {
	var r retryableError
	return errors.As(err, &r)
}

// Func declares a tool from a typed function. The argument schema is
// generated from A unless spec.Schema is already set.
func Func[A any](spec Spec, run func(ctx context.Context, call Call, args A) (results.Outcome, error)) (Tool, error) {
	if len(spec.Schema) == 0 {
		schema, err := SchemaFor[A]()
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", spec.Name, err)
		}
		spec.Schema = schema
	}
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return funcTool[A]{spec: spec, run: run}, nil
}

// MustFunc is Func for package-level declarations; it panics on a bad spec.
func MustFunc[A any](spec Spec, run func(ctx context.Context, call Call, args A) (results.Outcome, error)) Tool {
	t, err := Func(spec, run)
	if err != nil {
		panic(err)
	}
	return t
}

type funcTool[A any] struct {
	spec Spec
	run  func(context.Context, Call, A) (results.Outcome, error)
}

func (t funcTool[A]) Spec() Spec { return t.spec }

func (t funcTool[A]) Run(ctx context.Context, call Call) (results.Outcome, error) {
	args, err := decodeArgs[A](call)
	if err != nil {
		return results.FailTool("%v", err), nil
	}
	return t.run(ctx, call, args)
}

// decodeArgs reads a call's arguments into A. The error is a sentence for
// the model (or, in a preview, the person deciding).
func decodeArgs[A any](call Call) (A, error) {
	var args A
	if len(call.Arguments) > 0 {
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			return args, fmt.Errorf("invalid arguments: %w", err)
		}
	}
	return args, nil
}

// ConnectionUser is a tool that acts through the calling user's account
// connection (package connections) to a provider. Remembered grants
// (package grants) hold only while that connection is the one they were
// made with.
type ConnectionUser interface {
	// ConnectionProvider names the provider; empty when this tool, as
	// configured, uses no user's connection.
	ConnectionProvider() string
}
