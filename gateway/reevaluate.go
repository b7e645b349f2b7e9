package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	tollgate "github.com/tollgate-dev/tollgate"
)

// reevaluate is POST /v1/turns/{id}/reevaluate: the turn's calls waiting
// for approval are decided again under the workers' current approval
// rules, as the key's principal asked. It needs the operate scope, since
// it may release calls nobody approved; a key limited to some tools may
// not use it, since it decides every waiting call at once.
func (s *Server) reevaluate(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	if len(p.Tools) > 0 {
		fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s is limited to calls of %s, and re-evaluation decides every waiting call of the turn", p.Principal, strings.Join(p.Tools, ", ")))
		return
	}
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	if _, err := s.reach(ctx, p, id); err != nil {
		s.temporalFailure(w, r, "read the turn", err)
		return
	}
	out, err := s.turns.Reevaluate(ctx, id, p.Principal)
	if err != nil {
		var rej *tollgate.RejectedError
		if !errors.As(err, &rej) {
			err = s.noWorker(ctx, err, id)
		}
		s.respondFailure(w, r, err)
		return
	}
	s.log.Info("Waiting calls re-evaluated through the gateway", "turn", id, "calls", len(out.Calls), "by", p.Principal)
	writeJSON(w, http.StatusOK, out)
}
