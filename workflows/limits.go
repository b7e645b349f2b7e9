package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// Bounds on what a model reply may ask for in one step. The model is not
// trusted: a prompt-injected reply with thousands of calls would otherwise
// exceed the server's pending-activity limit and freeze the turn.
const (
	defaultMaxCallsPerStep = 64
	// maxCallsPerStepCeiling keeps policy.max_calls_per_step well under the
	// server's default of 2,000 pending activities per workflow.
	maxCallsPerStepCeiling = 256
	// maxArgumentBytes bounds one call's arguments, as the model sent them
	// or as a person edited them.
	maxArgumentBytes = 256 << 10
	// maxCallIDBytes bounds a model's call id; a longer one is replaced by
	// a generated id, since people type it and it names an activity.
	maxCallIDBytes = 128
)

// Bounds on what a person (or anything that can send a Signal) may put in
// a response. Reasons and answers reach the model and the history.
const (
	maxReasonBytes = 4 << 10
	maxByBytes     = 256
	maxAnswerBytes = 64 << 10
)

// Temporal terminates a workflow whose history passes 51,200 events or
// 50 MiB (the server's defaults). A turn ends itself well before that, so
// every call is answered and the result says why, even when a flood of
// Signals is what grew it.
const (
	defaultMaxHistoryEvents = 20_000
	defaultMaxHistoryBytes  = 20 << 20
	maxHistoryEventsCeiling = 40_000
	maxHistoryBytesCeiling  = 40 << 20
)

func (p Policy) maxCallsPerStep() int {
	if p.MaxCallsPerStep > 0 {
		return p.MaxCallsPerStep
	}
	return defaultMaxCallsPerStep
}

func (p Policy) historyLimits() (events, bytes int) {
	events, bytes = defaultMaxHistoryEvents, defaultMaxHistoryBytes
	if p.MaxHistoryEvents > 0 {
		events = p.MaxHistoryEvents
	}
	if p.MaxHistoryBytes > 0 {
		bytes = p.MaxHistoryBytes
	}
	return events, bytes
}

func validateLimits(p Policy) error {
	if p.MaxCallsPerStep < 0 || p.MaxCallsPerStep > maxCallsPerStepCeiling {
		return fmt.Errorf("policy.max_calls_per_step is %d; it must be between 1 and %d (or omitted for %d)", p.MaxCallsPerStep, maxCallsPerStepCeiling, defaultMaxCallsPerStep)
	}
	if p.MaxHistoryEvents < 0 || p.MaxHistoryEvents > maxHistoryEventsCeiling {
		return fmt.Errorf("policy.max_history_events is %d; it must be between 1 and %d (or omitted for %d)", p.MaxHistoryEvents, maxHistoryEventsCeiling, defaultMaxHistoryEvents)
	}
	if p.MaxHistoryBytes < 0 || p.MaxHistoryBytes > maxHistoryBytesCeiling {
		return fmt.Errorf("policy.max_history_bytes is %d; it must be between 1 and %d (or omitted for %d)", p.MaxHistoryBytes, maxHistoryBytesCeiling, defaultMaxHistoryBytes)
	}
	if p.WorkspaceTimeout < 0 {
		return fmt.Errorf("policy.workspace_timeout is %s; it must be positive (or omitted for %s)", time.Duration(p.WorkspaceTimeout), formatDuration(DefaultWorkspaceTimeout))
	}
	return nil
}

// checkResponseSize rejects a response whose fields exceed their bounds,
// naming the field and the limit.
// maxGroups bounds the groups a response names.
const maxGroups = 64

// checkGroups bounds a response's groups: each is a name like by.
func checkGroups(groups []string) error {
	if len(groups) > maxGroups {
		return fmt.Errorf("groups names %d groups; a response may name at most %d", len(groups), maxGroups)
	}
	for _, g := range groups {
		if g == "" || len(g) > maxByBytes {
			return fmt.Errorf("a group name must be 1 to %d bytes", maxByBytes)
		}
	}
	return nil
}

func checkResponseSize(r Response) error {
	for _, f := range []struct {
		name string
		size int
		max  int
	}{
		{"by", len(r.By), maxByBytes},
		{"reason", len(r.Reason), maxReasonBytes},
		{"answer", len(r.Answer), maxAnswerBytes},
		{"arguments", len(r.Arguments), maxArgumentBytes},
	} {
		if f.size > f.max {
			return fmt.Errorf("%s is %d bytes; it may be at most %d", f.name, f.size, f.max)
		}
	}
	return nil
}

// guardHistory ends the turn, as a cancellation would, once its history
// nears the policy's limits. The condition is evaluated after every event
// the workflow handles, Signals included.
func (t *turn) guardHistory(ctx workflow.Context) {
	maxEvents, maxBytes := t.in.Policy.historyLimits()
	var events, size int
	err := workflow.Await(ctx, func() bool {
		info := workflow.GetInfo(ctx)
		events, size = info.GetCurrentHistoryLength(), info.GetCurrentHistorySize()
		return events >= maxEvents || size >= maxBytes
	})
	if err != nil {
		return
	}
	t.stopReason = fmt.Sprintf("the turn's history reached %d events and %d bytes (limits %d and %d), so the turn was ended before the server would terminate it", events, size, maxEvents, maxBytes)
	workflow.GetLogger(ctx).Warn("Ending a turn whose history nears its limit", "events", events, "bytes", size, "invalid_signals", t.invalidSignals)
	t.stop()
}
