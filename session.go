package tollgate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// StartSession starts an AgentSession, one conversation of many turns,
// under the given workflow id (empty lets Temporal choose). Messages go to
// it with Send; each becomes a child turn <id>/turn-<n>, answered with
// Respond like any turn.
func (c Client) StartSession(ctx context.Context, id string, in workflows.SessionInput) (client.WorkflowRun, error) {
	summary := "agent session"
	if in.Turn.User != "" {
		summary += " with " + in.Turn.User
	}
	_, details := workflows.StartSummary(in.Turn)
	run, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: c.taskQueue(), StaticSummary: summary, StaticDetails: details, EnableEagerStart: c.EagerStart},
		workflows.SessionWorkflowName, in)
	if err != nil {
		return nil, fmt.Errorf("start session %s: %w", id, err)
	}
	return run, nil
}

// Send adds a message to the session through the send Update and returns
// the id of the turn that answers it: started when the session was idle,
// queued (Sent.Queued) behind the running turn otherwise. A refusal (an
// empty or oversized message, a full queue, a session that has ended) is
// a *RejectedError whose Type is workflows.ErrTypeInvalidMessage or
// ErrTypeSessionClosed.
func (c Client) Send(ctx context.Context, sessionID string, m workflows.Send) (workflows.Sent, error) {
	return c.SendOnce(ctx, sessionID, "", m)
}

// SendOnce is Send under a chosen Update id: the server keeps one Update
// per id, so a message resent under the same id after a timeout (no
// worker was running, say) is added once. Empty lets the SDK choose.
func (c Client) SendOnce(ctx context.Context, sessionID, updateID string, m workflows.Send) (workflows.Sent, error) {
	var sent workflows.Sent
	err := c.sessionUpdate(ctx, sessionID, updateID, workflows.SendName, m, &sent)
	return sent, err
}

// End closes the session: a running turn is cancelled (every call it
// waits on is answered), queued messages stay unanswered, and the final
// conversation comes back.
func (c Client) End(ctx context.Context, sessionID string, e workflows.End) (workflows.Conversation, error) {
	var conv workflows.Conversation
	err := c.sessionUpdate(ctx, sessionID, "", workflows.EndName, e, &conv)
	return conv, err
}

func (c Client) sessionUpdate(ctx context.Context, sessionID, updateID, name string, arg, out any) error {
	h, err := c.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		UpdateID:     updateID,
		WorkflowID:   sessionID,
		UpdateName:   name,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, out)
	}
	if err != nil {
		var app *temporal.ApplicationError
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &app):
			return &RejectedError{Reason: app.Message(), Type: app.Type()}
		case errors.As(err, &nf) && strings.Contains(nf.Error(), "already completed"):
			return &RejectedError{Reason: fmt.Sprintf("the session %s has ended; it takes no more messages", sessionID), Type: workflows.ErrTypeSessionClosed}
		}
		return fmt.Errorf("%s to session %s: %w", name, sessionID, err)
	}
	return nil
}

// Conversation runs the conversation Query and, for the running turn,
// its state Query: the turn's record then says whether it waits and
// lists the calls that wait for a person, so one session id is all a UI
// needs. If the turn cannot answer just now (it is ending), the record
// stays as the session reported it.
func (c Client) Conversation(ctx context.Context, sessionID string) (workflows.Conversation, error) {
	v, err := c.Temporal.QueryWorkflow(ctx, sessionID, "", workflows.ConversationQuery)
	if err != nil {
		return workflows.Conversation{}, fmt.Errorf("query the conversation of session %s: %w", sessionID, err)
	}
	var conv workflows.Conversation
	if err := v.Get(&conv); err != nil {
		return workflows.Conversation{}, fmt.Errorf("decode the conversation of session %s: %w", sessionID, err)
	}
	if conv.Running == "" || len(conv.Turns) == 0 || conv.Turns[len(conv.Turns)-1].ID != conv.Running {
		return conv, nil
	}
	s, err := c.State(ctx, conv.Running)
	if err != nil {
		return conv, nil
	}
	rec := &conv.Turns[len(conv.Turns)-1]
	if !s.Status.Final() {
		rec.Status = s.Status
	}
	rec.Waiting = waitingCards(s.Cards)
	return conv, nil
}

func waitingCards(cards []results.Card) []results.Card {
	var out []results.Card
	for _, card := range cards {
		if card.State.Waiting() {
			out = append(out, card)
		}
	}
	return out
}
