// Package turnlist finds turns through Temporal's visibility store, by
// the search attributes the AgentTurn workflow keeps current
// (TollgateStatus, TollgateUser, TollgateWaitingCalls, TollgateWaitingTools),
// without asking any turn. The gateway's GET /v1/turns and `starter list`
// both list through it.
package turnlist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/workflows"
)

// Limits of one listing.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// maxUserLen bounds a user filter; users are principals or names.
const maxUserLen = 256

// maxParentLen bounds a parent filter: a turn id, as the turn lists it.
const maxParentLen = 256

// Filter selects turns. The zero value lists the newest DefaultLimit
// turns of any status and user.
type Filter struct {
	// Status is one of the turn statuses (waiting, running, completed,
	// ...); empty means any.
	Status workflows.Status
	// User is the turn's user; empty means any.
	User string
	// Users, when set, limits the listing to turns of these users (an API
	// key's limit), on top of User: a User outside them lists nothing.
	Users []string
	// Limit is how many turns at most; 0 means DefaultLimit.
	Limit int
	// Parent, when set, lists the turns of the agents that turn called as
	// tools (TollgateParent). Otherwise such turns are left out, as they
	// show under their caller, unless Children is set.
	Parent   string
	Children bool
}

// statuses are the values TollgateStatus takes.
var statuses = []workflows.Status{
	workflows.StatusRunning, workflows.StatusWaiting, workflows.StatusCompleted, workflows.StatusFailed,
	workflows.StatusCancelled, workflows.StatusTransferred, workflows.StatusMaxSteps, workflows.StatusBudgetExhausted,
}

// Check reports the first thing wrong with f, as a sentence for the
// person who wrote it.
func (f Filter) Check() error {
	if f.Status != "" && !slices.Contains(statuses, f.Status) {
		names := make([]string, len(statuses))
		for i, s := range statuses {
			names[i] = string(s)
		}
		return fmt.Errorf("status %q is not one of %s", f.Status, strings.Join(names, ", "))
	}
	if len(f.User) > maxUserLen {
		return fmt.Errorf("user is longer than %d bytes", maxUserLen)
	}
	if err := checkLiteral(f.User); err != nil {
		return err
	}
	if len(f.Parent) > maxParentLen {
		return fmt.Errorf("parent is longer than %d bytes", maxParentLen)
	}
	if err := checkLiteral(f.Parent); err != nil {
		return fmt.Errorf("parent: %w", err)
	}
	if f.Parent != "" && f.Children {
		// Parent already lists only children; children would read as
		// "and every other child too", which the query cannot say.
		return fmt.Errorf("parent and children do not go together: parent lists only the turns that turn called")
	}
	for _, u := range f.Users {
		if u == "" || len(u) > maxUserLen {
			return fmt.Errorf("a limiting user must be 1 to %d bytes", maxUserLen)
		}
		if err := checkLiteral(u); err != nil {
			return err
		}
	}
	if f.Limit < 0 || f.Limit > MaxLimit {
		return fmt.Errorf("limit must be between 1 and %d", MaxLimit)
	}
	return nil
}

// checkLiteral refuses quotes and control characters, which keeps the
// visibility query one literal per value, whatever the caller sends.
func checkLiteral(user string) error {
	if strings.ContainsAny(user, "'\"\\`") || strings.ContainsFunc(user, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return fmt.Errorf("user must not contain quotes, backslashes or control characters")
	}
	return nil
}

// Query is the visibility query for f, the same one
// `temporal workflow list --query` takes.
func (f Filter) Query() string {
	q := fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowName)
	if f.Status != "" {
		q += fmt.Sprintf(" AND %s = '%s'", workflows.StatusAttr.GetName(), f.Status)
	}
	if f.Status != "" && !f.Status.Final() {
		// A workflow terminated or timed out keeps the status it last
		// listed; it runs no longer (see fromInfo).
		q += " AND ExecutionStatus = 'Running'"
	}
	if f.User != "" {
		q += fmt.Sprintf(" AND %s = '%s'", workflows.UserAttr.GetName(), f.User)
	}
	if len(f.Users) > 0 {
		q += fmt.Sprintf(" AND %s IN ('%s')", workflows.UserAttr.GetName(), strings.Join(f.Users, "', '"))
	}
	switch {
	case f.Parent != "":
		q += fmt.Sprintf(" AND %s = '%s'", workflows.ParentAttr.GetName(), f.Parent)
	case !f.Children:
		q += fmt.Sprintf(" AND %s IS NULL", workflows.ParentAttr.GetName())
	}
	return q
}

// Turn is one listed turn, as visibility knows it.
type Turn struct {
	ID    string `json:"id"`
	RunID string `json:"run_id"`
	// Status is TollgateStatus; for a turn without it (started before the
	// attributes existed, or on a server without them) it is derived from
	// the workflow's own status.
	Status workflows.Status `json:"status"`
	User   string           `json:"user,omitempty"`
	// Session is the session whose turn this is (TollgateSession); empty
	// for a turn started on its own.
	Session      string     `json:"session,omitempty"`
	WaitingCalls []string   `json:"waiting_calls"`
	WaitingTools []string   `json:"waiting_tools"`
	StartTime    time.Time  `json:"start_time"`
	CloseTime    *time.Time `json:"close_time,omitempty"`
	// Open is whether the workflow still runs (a turn that is not open
	// has nobody to ask for its state without replaying it).
	Open bool `json:"-"`
	// HasStatus reports whether TollgateStatus was set.
	HasStatus bool `json:"-"`
}

// List runs f's query and returns one page of turns, newest first.
func List(ctx context.Context, c client.Client, f Filter) ([]Turn, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	if f.User != "" && len(f.Users) > 0 && !slices.Contains(f.Users, f.User) {
		return []Turn{}, nil
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: int32(limit), Query: f.Query()})
	var invalid *serviceerror.InvalidArgument
	if err != nil && f.Parent == "" && !f.Children && errors.As(err, &invalid) && strings.Contains(invalid.Error(), workflows.ParentAttr.GetName()) {
		// A server without TollgateParent registered marks no turn as a
		// child either: list them all rather than nothing.
		f.Children = true
		resp, err = c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: int32(limit), Query: f.Query()})
	}
	if err != nil {
		return nil, fmt.Errorf("list turns (%s): %w", f.Query(), err)
	}
	execs := resp.GetExecutions()
	if len(execs) > limit {
		execs = execs[:limit]
	}
	out := make([]Turn, 0, len(execs))
	for _, e := range execs {
		out = append(out, fromInfo(e))
	}
	// Visibility orders open turns by start time but closed ones by close
	// time; a page is shown by start time, newest first.
	slices.SortStableFunc(out, func(a, b Turn) int { return b.StartTime.Compare(a.StartTime) })
	return out, nil
}

func fromInfo(e *workflowpb.WorkflowExecutionInfo) Turn {
	t := Turn{
		ID:           e.GetExecution().GetWorkflowId(),
		RunID:        e.GetExecution().GetRunId(),
		StartTime:    e.GetStartTime().AsTime(),
		Open:         e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		WaitingCalls: []string{},
		WaitingTools: []string{},
	}
	if e.GetCloseTime() != nil {
		ct := e.GetCloseTime().AsTime()
		t.CloseTime = &ct
	}
	fields := e.GetSearchAttributes().GetIndexedFields()
	var status string
	if decode(fields[workflows.StatusAttr.GetName()], &status) && status != "" {
		t.Status, t.HasStatus = workflows.Status(status), true
	}
	// A closed workflow whose turn still lists itself as running or
	// waiting did not end on the turn's terms (it was terminated, timed
	// out, or failed in setup before turns listed that): its own status
	// is the truth.
	if !t.HasStatus || (!t.Open && !t.Status.Final()) {
		t.Status = executionStatus(e.GetStatus())
	}
	decode(fields[workflows.UserAttr.GetName()], &t.User)
	decode(fields[workflows.SessionAttr.GetName()], &t.Session)
	decode(fields[workflows.WaitingCallsAttr.GetName()], &t.WaitingCalls)
	decode(fields[workflows.WaitingToolsAttr.GetName()], &t.WaitingTools)
	if t.WaitingCalls == nil {
		t.WaitingCalls = []string{}
	}
	if t.WaitingTools == nil {
		t.WaitingTools = []string{}
	}
	return t
}

// decode reads one search attribute value; a missing or unreadable one
// leaves v as it was.
func decode(p *commonpb.Payload, v any) bool {
	if p == nil {
		return false
	}
	return converter.GetDefaultDataConverter().FromPayload(p, v) == nil
}

// executionStatus names a workflow's own status in the turn's terms, for
// turns without TollgateStatus. A workflow that completed returned a
// result whose status visibility does not know: "completed" is the best
// guess and the state query has the truth.
func executionStatus(s enumspb.WorkflowExecutionStatus) workflows.Status {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return workflows.StatusRunning
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return workflows.StatusCompleted
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return workflows.StatusCancelled
	default:
		// failed, terminated, timed out: the turn did not end on its own
		// terms.
		return workflows.StatusFailed
	}
}
