package gateway

import (
	"context"
	"net/http"

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
