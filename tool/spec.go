package tool

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// Approval is a tool's default approval requirement. The worker's default
// is a floor: turn input may raise it to always, never lower it.
type Approval string

const (
	ApprovalNever  Approval = "never"
	ApprovalAlways Approval = "always"
)

// Defaults applied by Spec.WithDefaults.
const (
	DefaultTimeout           = 60 * time.Second
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultMaxOutputBytes    = 32 * 1024
	DefaultMaxOutputLines    = 1000
)

// Spec describes a tool to the model, to the workflow (approval, retries,
// concurrency, timeouts) and to people.
type Spec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Approval    Approval        `json:"approval"`
	// Idempotent tools are retried with backoff; others run at most once.
	Idempotent bool `json:"idempotent"`
	// Concurrent tools may run in parallel with other calls of one step.
	Concurrent        bool          `json:"concurrent"`
	Timeout           time.Duration `json:"timeout"`
	HeartbeatInterval time.Duration `json:"heartbeat_interval"`
	// MaxOutputBytes and MaxOutputLines bound what the model is shown.
	MaxOutputBytes int `json:"max_output_bytes"`
	MaxOutputLines int `json:"max_output_lines"`
	// Previews says the tool implements Previewer, so the workflow can ask
	// for a preview of a call waiting for approval without calling the
	// tool first. Describe sets it from the tool itself; FuncWithPreview
	// sets it on the spec it builds.
	Previews bool `json:"previews,omitempty"`
	// Local asks for the tool to run as a Temporal local activity: in the
	// workflow's own worker, in the same workflow task as the model reply
	// that made the call, with no activity task round trip through the
	// server. Only for short tools (well under the workflow task timeout)
	// that are Idempotent: a local activity whose worker dies runs again
	// on the next worker, so a tool that is not idempotent never runs
	// locally, whatever Local says (RunsLocally). Approval, schema
	// validation, limits, retries and typed results are the same either
	// way. No turn input switches it: a turn started on a worker of this
	// version runs every listed tool that RunsLocally as a local activity.
	// To compare the two (the benchmarks do), register the same function
	// twice, under two names, with and without Local.
	Local bool `json:"local,omitempty"`
	// Workspace says the tool reads or changes the worker's workspace
	// (files, a shell). Where workers do not share one workspace, such a
	// call runs on the worker that holds the turn's workspace (see
	// workflows/doc.go, "Workspace affinity"). Tools that reach only
	// remote services (HTTP, MCP servers) leave it unset and run on any
	// worker.
	Workspace bool `json:"workspace,omitempty"`
}

// RunsLocally reports whether calls of the tool run as local activities:
// it asks to (Local) and may run twice (Idempotent).
func (s Spec) RunsLocally() bool { return s.Local && s.Idempotent }

// validName allows what model providers accept in a function name, plus
// '.' between non-empty segments, so tools from an MCP server can be named
// <server>.<tool>. A provider whose API refuses '.' maps names on its wire.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]+(\.[a-zA-Z0-9_-]+)*$`)

// maxNameBytes bounds a tool name, as providers do.
const maxNameBytes = 64

// WithDefaults fills unset limits and approval.
func (s Spec) WithDefaults() Spec {
	if s.Approval == "" {
		s.Approval = ApprovalNever
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	if s.HeartbeatInterval <= 0 {
		s.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if s.MaxOutputBytes <= 0 {
		s.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if s.MaxOutputLines <= 0 {
		s.MaxOutputLines = DefaultMaxOutputLines
	}
	if len(s.Schema) == 0 {
		s.Schema = json.RawMessage(`{"type":"object"}`)
	}
	return s
}

// Validate reports whether the spec is usable: a name providers accept, a
// known approval and a schema that compiles.
func (s Spec) Validate() error {
	_, err := s.compile()
	return err
}

// compile validates the spec and returns its compiled schema, so the
// registry compiles each schema once rather than on every call.
func (s Spec) compile() (*Schema, error) {
	if len(s.Name) > maxNameBytes || !validName.MatchString(s.Name) {
		return nil, fmt.Errorf("tool name %q must be 1-64 letters, digits, '_' or '-', with '.' only between them (server.tool)", s.Name)
	}
	if s.Description == "" {
		return nil, fmt.Errorf("tool %s has no description", s.Name)
	}
	switch s.Approval {
	case ApprovalNever, ApprovalAlways:
	default:
		return nil, fmt.Errorf("tool %s has approval %q, want never or always", s.Name, s.Approval)
	}
	schema, err := CompileSchema(s.Schema)
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", s.Name, err)
	}
	return schema, nil
}
