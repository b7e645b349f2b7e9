package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/grants"
)

// GrantList is the body of GET /v1/grants.
type GrantList struct {
	User   string         `json:"user"`
	Grants []grants.Grant `json:"grants"`
}

// grantsUser is the user whose grants a request reads or revokes: the
// query's user, which a key limited to users must reach; a key limited
// to one user may leave it out.
func grantsUser(w http.ResponseWriter, r *http.Request, p apikey.Entry) (string, bool) {
	user := r.URL.Query().Get("user")
	if user == "" && len(p.Users) == 1 {
		user = p.Users[0]
	}
	switch {
	case user == "":
		fail(w, r, http.StatusBadRequest, "name the user whose grants these are: ?user=NAME")
		return "", false
	case len(user) > 256 || strings.ContainsFunc(user, func(c rune) bool { return c < 0x20 || c == 0x7f }):
		fail(w, r, http.StatusBadRequest, "the user name is not valid: at most 256 bytes, no control characters")
		return "", false
	case !p.Reaches(user):
		fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s reaches only the turns of %s, not %s's", p.Principal, strings.Join(p.Users, ", "), user))
		return "", false
	}
	return user, true
}

// listGrants answers GET /v1/grants?user=NAME: the user's remembered
// grants, invalidated ones included, oldest first.
func (s *Server) listGrants(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	user, ok := grantsUser(w, r, p)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	gs, err := s.turns.Grants(ctx, user)
	if err != nil {
		s.temporalFailure(w, r, "list the grants", err)
		return
	}
	if gs == nil {
		gs = []grants.Grant{}
	}
	writeJSON(w, http.StatusOK, GrantList{User: user, Grants: gs})
}

// revokeGrant answers DELETE /v1/grants/{id}?user=NAME: later calls the
// grant covered ask again. A key limited to some tools revokes only
// grants of those tools.
func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	user, ok := grantsUser(w, r, p)
	if !ok {
		return
	}
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	if len(p.Tools) > 0 {
		gs, err := s.turns.Grants(ctx, user)
		if err != nil {
			s.temporalFailure(w, r, "read the grants", err)
			return
		}
		i := slices.IndexFunc(gs, func(g grants.Grant) bool { return g.ID == id })
		if i >= 0 && !p.MayAnswer(gs[i].Tool) {
			fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s may revoke only grants of %s; grant %s is of %s", p.Principal, strings.Join(p.Tools, ", "), id, gs[i].Tool))
			return
		}
	}
	g, err := s.turns.RevokeGrant(ctx, user, id)
	switch {
	case errors.Is(err, grants.ErrNoGrant):
		fail(w, r, http.StatusNotFound, fmt.Sprintf("%s has no grant %q", user, id))
		return
	case err != nil:
		s.temporalFailure(w, r, "revoke the grant", err)
		return
	}
	s.log.Info("Grant revoked through the gateway", "user", user, "grant", id, "tool", g.Tool, "by", p.Principal)
	writeJSON(w, http.StatusOK, g)
}
