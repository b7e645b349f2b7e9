package grants

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// Names of the per-user grants workflow (workflows.GrantsWorkflow) and
// its handlers. Changing one strands every stored grant.
const (
	WorkflowName     = "UserGrants"
	WorkflowIDPrefix = "tollgate-grants/"
	AddUpdate        = "add"
	RevokeUpdate     = "revoke"
	InvalidateSignal = "invalidate"
	ListQuery        = "grants"
	// ErrTypeNoGrant is the failure type of a revoke of a grant the user
	// does not have.
	ErrTypeNoGrant = "NoGrant"
	// ErrTypeInvalidGrant is the failure type of an add the workflow
	// refuses (a full list, a grant missing a field).
	ErrTypeInvalidGrant = "InvalidGrant"
)

// WorkflowID is the id of user's grants workflow.
func WorkflowID(user string) string { return WorkflowIDPrefix + user }

// RevokeInput is the revoke Update's payload.
type RevokeInput struct {
	ID string `json:"id"`
	By string `json:"by,omitempty"`
}

// Workflows keeps each user's grants in a long-lived workflow of that
// user (WorkflowID): durable, and one writer per user however many
// workers and gateways there are.
type Workflows struct {
	Client client.Client
}

func (w Workflows) List(ctx context.Context, user string) ([]Grant, error) {
	v, err := w.Client.QueryWorkflow(ctx, WorkflowID(user), "", ListQuery)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return nil, nil
		}
		return nil, fmt.Errorf("list the grants of %s: %w", user, err)
	}
	var gs []Grant
	if err := v.Get(&gs); err != nil {
		return nil, fmt.Errorf("read the grants of %s: %w", user, err)
	}
	return gs, nil
}

func (w Workflows) Add(ctx context.Context, taskQueue string, g Grant) (Grant, error) {
	start := w.Client.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       WorkflowID(g.User),
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, WorkflowName, GrantsInput{User: g.User})
	h, err := w.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			// Named by the grant: a retried add attaches to the first.
			UpdateID:     "add:" + g.ID,
			UpdateName:   AddUpdate,
			Args:         []any{g},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		return Grant{}, fmt.Errorf("store grant %s of %s: %w", g.ID, g.User, refused(err))
	}
	var out Grant
	if err := h.Get(ctx, &out); err != nil {
		return Grant{}, fmt.Errorf("store grant %s of %s: %w", g.ID, g.User, refused(err))
	}
	return out, nil
}

func (w Workflows) Revoke(ctx context.Context, user, id string) (Grant, error) {
	h, err := w.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   WorkflowID(user),
		UpdateName:   RevokeUpdate,
		Args:         []any{RevokeInput{ID: id}},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var g Grant
	if err == nil {
		err = h.Get(ctx, &g)
	}
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return Grant{}, fmt.Errorf("user %s has no grant %q: %w", user, id, ErrNoGrant)
		}
		return Grant{}, refused(err)
	}
	return g, nil
}

func (w Workflows) Invalidate(ctx context.Context, user string, inv []Invalidation) error {
	if err := w.Client.SignalWorkflow(ctx, WorkflowID(user), "", InvalidateSignal, inv); err != nil {
		return fmt.Errorf("mark grants of %s invalidated: %w", user, err)
	}
	return nil
}

// refused turns the workflow's refusal into its sentence, wrapping
// ErrNoGrant where that is what it was.
func refused(err error) error {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		msg := app.Message()
		if app.Type() == ErrTypeNoGrant {
			return fmt.Errorf("%s: %w", strings.TrimSuffix(msg, ": "+ErrNoGrant.Error()), ErrNoGrant)
		}
		return &RefusedError{Reason: msg}
	}
	return err
}

// GrantsInput starts a user's grants workflow, and carries its grants
// over when it continues as new.
type GrantsInput struct {
	User   string  `json:"user"`
	Grants []Grant `json:"grants,omitempty"`
}
