package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.temporal.io/api/serviceerror"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/workflows"
)

// agentsResponse is the body of GET /v1/agents.
type agentsResponse struct {
	Agents []workflows.AgentInfo `json:"agents"`
}

// listAgents answers GET /v1/agents: the named agents the workers of the
// gateway's task queue offer, as one of them reports them.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	agents, err := s.turns.Agents(ctx)
	if err != nil {
		s.temporalFailure(w, r, "list agents", s.noWorker(ctx, err, "(agents)"))
		return
	}
	writeJSON(w, http.StatusOK, agentsResponse{Agents: agents})
}

// continueRequest is the body of POST /v1/turns/{id}/continue.
type continueRequest struct {
	// ID is the new turn's id; empty makes one.
	ID string `json:"id,omitempty"`
	// Prompt is an optional message after the handoff.
	Prompt string `json:"prompt,omitempty"`
}

// continueTurn answers POST /v1/turns/{id}/continue: a turn that ended
// transferred goes on as a new turn of the agent its transfer names, for
// the same user.
func (s *Server) continueTurn(w http.ResponseWriter, r *http.Request) {
	var req continueRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	p := principal(r)
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	t, err := s.describeTurn(ctx, id, "")
	if err != nil {
		s.temporalFailure(w, r, "read the turn", err)
		return
	}
	user := p.Principal
	if p.Limited() {
		if !p.Reaches(t.user) {
			fail(w, r, http.StatusNotFound, fmt.Sprintf("there is no turn %s", id))
			return
		}
		user = t.user
	} else if t.user != "" && t.user != p.Principal {
		fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s may continue only its own turns; turn %s is %s's", p.Principal, id, t.user))
		return
	}
	if t.open {
		fail(w, r, http.StatusConflict, fmt.Sprintf("turn %s is still running; continue it once it has ended transferred", id))
		return
	}
	if req.ID == "" {
		req.ID = newTurnID()
	} else if err := checkID(req.ID); err != nil {
		fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	run, err := s.turns.ContinueWithAgent(ctx, id, tollgate.ContinueOptions{ID: req.ID, Prompt: req.Prompt, User: user})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.Is(err, tollgate.ErrNotTransferred):
		fail(w, r, http.StatusConflict, fmt.Sprintf("turn %s did not end with a transfer, so there is no agent to continue with", id))
		return
	case errors.As(err, &started):
		fail(w, r, http.StatusConflict, s.takenID(r.Context(), req.ID))
		return
	case err != nil:
		s.temporalFailure(w, r, "continue the turn", err)
		return
	}
	s.log.Info("Transferred turn continued through the gateway", "turn", id, "next", req.ID, "by", p.Principal)
	w.Header().Set("Location", "/v1/turns/"+pathEscape(req.ID))
	writeJSON(w, http.StatusCreated, map[string]string{"id": req.ID, "run_id": run.GetRunID()})
}
