package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/internal/turnlist"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/workflows"
)

// The inbox lists every call that waits for a person, newest turn first,
// with a form per decision. Forms post to /inbox/respond and, when the
// turn takes the response, redirect back to /inbox; a refusal renders the
// inbox again with the validator's sentence beside that call and the
// person's input kept.

type inboxPage struct {
	pageBase
	Principal  string
	Dev        bool
	CSRF       string
	CanRespond bool
	Refresh    bool
	// Live: the page follows /inbox/events and reloads only as a fallback.
	Live     bool
	Problems []string
	Items    []inboxItem
}

type inboxItem struct {
	TurnID string
	User   string
	// InSession: the call's turn runs in a session, so an approval may be
	// remembered for the rest of it.
	InSession bool
	Summary   string
	Asked     string
	Card      results.Card
	// StateLabel says what the call waits for, in words.
	StateLabel string
	Args       string
	Anchor     string
	CSRF       string
	// ConnectURL starts the OAuth flow of a waiting_connection call.
	ConnectURL string
	// Chain names the agents down to the one whose call this is, for a
	// call that waits in an agent the turn called.
	Chain string
	// MayAnswer: the viewer can answer this call; Why says why not.
	MayAnswer bool
	Why       string
	// Error is a refusal of the viewer's last response to this call;
	// EditArgs, Reason and Answer keep what they typed.
	Error    string
	EditArgs string
	Reason   string
	Answer   string
}

type loginPage struct {
	pageBase
	CSRF  string
	Error string
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request) {
	v := s.resolveSession(w, r)
	if v.who == nil {
		s.renderLogin(w, http.StatusOK, v, "")
		return
	}
	if !v.who.Has(apikey.Read) {
		renderErrorPage(w, http.StatusForbidden, "No read scope", fmt.Sprintf("The key of %s does not have the read scope the inbox needs.", v.who.Principal), "")
		return
	}
	s.renderInbox(w, r, http.StatusOK, v, nil)
}

func (s *Server) renderLogin(w http.ResponseWriter, code int, v viewer, msg string) {
	nonce := newNonce()
	render(w, code, "login", nonce, loginPage{pageBase: pageBase{Title: "Sign in", Nonce: nonce}, CSRF: s.csrfToken(v.sess), Error: msg})
}

// inboxLimit is how many waiting turns the inbox shows. Each costs a
// state query on every refresh; a person works through the newest first.
const inboxLimit = 100

// renderInbox lists the waiting calls; failed, when set, is the viewer's
// refused response, shown beside its call.
func (s *Server) renderInbox(w http.ResponseWriter, r *http.Request, code int, v viewer, failed *inboxItem) {
	nonce := newNonce()
	page := inboxPage{
		pageBase:   pageBase{Title: "Inbox", Nonce: nonce},
		Principal:  v.who.Principal,
		Dev:        v.sess.Dev,
		CSRF:       s.csrfToken(v.sess),
		CanRespond: v.who.Has(apikey.Respond),
		Refresh:    failed == nil,
		Live:       s.opts.Events != nil,
	}
	turns, err := s.list(r.Context(), turnlist.Filter{Status: workflows.StatusWaiting, Limit: inboxLimit, Users: v.who.Users})
	if err != nil {
		s.log.Warn("Inbox could not list turns", "error", err)
		page.Problems = append(page.Problems, "The waiting turns could not be listed: Temporal did not answer. This page reloads by itself.")
	}
	if len(turns) == inboxLimit {
		page.Problems = append(page.Problems, fmt.Sprintf("Showing the newest %d waiting turns; older ones appear as these are answered (GET /v1/turns?status=waiting&limit=%d or starter list --waiting lists more).", inboxLimit, turnlist.MaxLimit))
	}
	// A called agent's turn waits too, and is listed on its own; its calls
	// show once, under the turn that called it, with the chain of agents.
	shown := map[string]bool{}
	for _, t := range turns {
		for _, a := range t.Agents {
			shown[a.Turn] = true
		}
	}
	for _, t := range turns {
		if shown[t.ID] {
			continue
		}
		if t.Error != "" {
			page.Problems = append(page.Problems, fmt.Sprintf("Turn %s waits on %s, but no worker answered for it; its calls are not shown.", t.ID, strings.Join(t.WaitingCalls, ", ")))
			continue
		}
		for _, c := range t.Waiting {
			it := inboxItem{
				TurnID: t.ID, User: t.User, Summary: t.Summary,
				Asked: t.StartTime.Local().Format("2006-01-02 15:04 MST"),
				Card:  c, StateLabel: stateLabel(c.State), Args: prettyJSON(c.Arguments), Anchor: anchor(t.ID, c.CallID),
				CSRF: page.CSRF,
			}
			it.Chain = agentChain(t.ID, t.Agents, c.CallID)
			// A call in an agent's turn ("<call>/<child call>") is the
			// agent's, which is in no session of its own: the turn
			// refuses remember session there.
			it.InSession = t.Session != "" && !strings.Contains(c.CallID, "/")
			it.EditArgs = it.Args
			it.ConnectURL = s.ConnectURL("", t.ID, t.User, c)
			it.MayAnswer, it.Why = mayAnswer(*v.who, c, t.User)
			if failed != nil && failed.TurnID == t.ID && failed.Card.CallID == c.CallID {
				it.Error, it.Reason, it.Answer = failed.Error, failed.Reason, failed.Answer
				if failed.EditArgs != "" {
					it.EditArgs = failed.EditArgs
				}
				failed = nil
			}
			page.Items = append(page.Items, it)
		}
	}
	if failed != nil {
		// The call is no longer listed (answered meanwhile, or the list
		// lags): say what happened at the top.
		page.Problems = append(page.Problems, fmt.Sprintf("Call %s of turn %s: %s", failed.Card.CallID, failed.TurnID, failed.Error))
	}
	render(w, code, "inbox", nonce, page)
}

// mayAnswer says whether the viewer's key may answer the call, and if
// not why; the turn checks the same again when the answer arrives.
func mayAnswer(who apikey.Entry, c results.Card, user string) (bool, string) {
	switch {
	case !who.Has(apikey.Respond):
		return false, ""
	case !who.MayAnswer(c.Tool):
		return false, fmt.Sprintf("Your key may answer only calls of %s.", strings.Join(who.Tools, ", "))
	}
	a := c.Approval
	if a == nil || a.Action != results.ApprovalRequireApproval || c.State != results.StatePendingApproval || c.Interrupt != nil {
		return true, ""
	}
	if a.Group != "" {
		groups := []string{a.Group}
		if a.Escalated && a.EscalateGroup != "" {
			groups = append(groups, a.EscalateGroup)
		}
		if !slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(who.Groups, g) }) {
			return false, fmt.Sprintf("Only members of %s may answer this call (rule %s).", strings.Join(groups, " or "), a.Rule)
		}
	}
	if slices.Contains(a.Approvals, who.Principal) {
		return false, fmt.Sprintf("You have approved this call; it waits for %d more approver(s).", a.Quorum-len(a.Approvals))
	}
	if a.SeparateDuties && user != "" && who.Principal == user {
		return false, fmt.Sprintf("You started this turn; rule %s needs someone else to approve its calls.", a.Rule)
	}
	return true, ""
}

func stateLabel(s results.State) string {
	switch s {
	case results.StatePendingApproval:
		return "needs approval"
	case results.StateWaitingAnswer:
		return "needs an answer"
	case results.StateWaitingConnection:
		return "needs a connection"
	}
	return string(s)
}

// anchor is an element id for a call, unique on the page.
func anchor(turn, call string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
				return r
			}
			return '-'
		}, s)
	}
	return "call-" + clean(turn) + "--" + clean(call)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	v := s.resolveSession(w, r)
	if err := r.ParseForm(); err != nil {
		fail(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	if !s.checkCSRF(v.sess, r.PostFormValue("csrf")) {
		s.renderLogin(w, http.StatusForbidden, v, "The form expired or did not come from this page (CSRF check failed). Try again.")
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	e, ok := apikey.Entry{}, false
	if s.opts.Keys != nil {
		e, ok = s.opts.Keys.Lookup(key)
	}
	if !ok {
		s.renderLogin(w, http.StatusUnauthorized, v, "That API key is not valid.")
		return
	}
	if !e.Has(apikey.Read) {
		s.renderLogin(w, http.StatusForbidden, v, fmt.Sprintf("The key of %s does not have the read scope the inbox needs.", e.Principal))
		return
	}
	if err := s.signIn(w, r, apikey.Hash(key)); err != nil {
		s.log.Warn("Inbox login could not be recorded", "principal", e.Principal, "error", err)
		s.renderLogin(w, http.StatusServiceUnavailable, v, "Signing in failed: the gateway could not record the session. Try again in a moment.")
		return
	}
	s.log.Info("Inbox login", "principal", e.Principal)
	http.Redirect(w, r, "/inbox", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	v := s.resolveSession(w, r)
	if err := r.ParseForm(); err != nil || !s.checkCSRF(v.sess, r.PostFormValue("csrf")) {
		renderErrorPage(w, http.StatusForbidden, "Sign-out refused", "The form did not come from the inbox (CSRF check failed).", "/inbox")
		return
	}
	if err := s.signOut(w, r, v.sess); err != nil {
		s.log.Warn("Inbox sign-out could not be recorded", "error", err)
		renderErrorPage(w, http.StatusServiceUnavailable, "Sign-out failed", "The gateway could not end the session; it still works. Try again in a moment.", "/inbox")
		return
	}
	http.Redirect(w, r, "/inbox", http.StatusSeeOther)
}

func (s *Server) inboxRespond(w http.ResponseWriter, r *http.Request) {
	v := s.resolveSession(w, r)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the form is larger than %d bytes", tooBig.Limit))
			return
		}
		fail(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	if !s.checkCSRF(v.sess, r.PostFormValue("csrf")) {
		renderErrorPage(w, http.StatusForbidden, "Form refused", "The form expired or did not come from the inbox (CSRF check failed). Reload the inbox and try again.", "/inbox")
		return
	}
	if v.who == nil {
		renderErrorPage(w, http.StatusUnauthorized, "Signed out", "Your session ended; sign in again.", "/inbox")
		return
	}
	if !v.who.Has(apikey.Respond) {
		renderErrorPage(w, http.StatusForbidden, "No respond scope", fmt.Sprintf("The key of %s does not have the respond scope answering needs.", v.who.Principal), "/inbox")
		return
	}
	turnID, callID := r.PostFormValue("turn"), r.PostFormValue("call")
	if err := checkTurnID(turnID); err != nil {
		renderErrorPage(w, http.StatusBadRequest, "No such turn", strings.ToUpper(err.Error()[:1])+err.Error()[1:]+".", "/inbox")
		return
	}
	item := &inboxItem{TurnID: turnID, Card: results.Card{CallID: callID}, Reason: r.PostFormValue("reason"), Answer: r.PostFormValue("answer")}
	resp := workflows.Response{CallID: callID, By: v.who.Principal, Groups: v.who.Groups}
	switch action := r.PostFormValue("action"); action {
	case "approve":
		// The turn checks remember (docs/approvals.md): an unknown value
		// or a call a grant may not stand for is refused with a sentence.
		resp.Decision, resp.Remember = results.DecisionApprove, r.PostFormValue("remember")
	case "deny":
		resp.Decision, resp.Reason = results.DecisionDeny, item.Reason
	case "edit":
		resp.Decision = results.DecisionApprove
		item.EditArgs = r.PostFormValue("arguments")
		if !json.Valid([]byte(item.EditArgs)) {
			item.Error = "The edited arguments are not valid JSON."
			s.renderInbox(w, r, http.StatusUnprocessableEntity, v, item)
			return
		}
		resp.Arguments = json.RawMessage(item.EditArgs)
	case "choose":
		resp.Decision = results.DecisionAnswer
		resp.Answer, _ = json.Marshal(item.Answer)
	case "answer":
		resp.Decision = results.DecisionAnswer
		// A question with a schema wants JSON; any other is answered with
		// the text as a JSON string.
		resp.Answer, _ = json.Marshal(item.Answer)
	case "connected":
		resp.Decision = results.DecisionConnected
	case "cancel":
		resp.Decision = results.DecisionCancel
	default:
		renderErrorPage(w, http.StatusBadRequest, "Unknown action", fmt.Sprintf("%q is not an inbox action.", action), "/inbox")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	run, err := s.reach(ctx, *v.who, turnID)
	if err != nil {
		code := http.StatusServiceUnavailable
		item.Error = "Temporal did not answer for this turn; try again in a moment."
		if errors.As(err, new(*serviceerror.NotFound)) {
			// Another user's turn, for a key limited to some: not there.
			code, item.Error = http.StatusNotFound, "There is no such turn."
		}
		s.renderInbox(w, r, code, v, item)
		return
	}
	card, err := s.answerableCard(ctx, *v.who, turnID, run, callID)
	switch {
	case errors.Is(err, errNoCall):
		item.Error = "The turn has no such call."
		s.renderInbox(w, r, http.StatusNotFound, v, item)
		return
	case errors.Is(err, errNotYourTool):
		_, why := mayAnswer(*v.who, card, "")
		renderErrorPage(w, http.StatusForbidden, "Not your call", why, "/inbox")
		return
	case err != nil:
		item.Error = "No worker answered for this turn; try again in a moment."
		s.renderInbox(w, r, http.StatusServiceUnavailable, v, item)
		return
	}
	if r.PostFormValue("action") == "answer" && card.Interrupt != nil && len(card.Interrupt.Schema) > 0 {
		if !json.Valid([]byte(item.Answer)) {
			item.Error = "This question wants a JSON answer (its schema says which)."
			s.renderInbox(w, r, http.StatusUnprocessableEntity, v, item)
			return
		}
		resp.Answer = json.RawMessage(item.Answer)
	}
	if _, err := s.apply(ctx, tollgate.RespondOptions{TurnID: turnID, RunID: run}, resp); err != nil {
		var rej *tollgate.RejectedError
		code := http.StatusInternalServerError
		switch {
		case errors.As(err, &rej):
			item.Error = rej.Reason
			code = rejectionStatus(rej)
		case errors.Is(err, errNoWorker):
			w.Header().Set("Retry-After", retryAfter)
			item.Error = fmt.Sprintf("No worker took the response within %s; it may still be applied when one starts. Sending it again is safe.", s.opts.RespondTimeout)
			code = http.StatusServiceUnavailable
		default:
			s.log.Warn("Inbox response failed", "turn", turnID, "call", callID, "error", err)
			item.Error = "The response could not be sent; the operator's log has the details."
		}
		s.renderInbox(w, r, code, v, item)
		return
	}
	s.log.Info("Response applied from the inbox", "turn", turnID, "call", callID, "decision", resp.Decision, "by", resp.By)
	http.Redirect(w, r, "/inbox", http.StatusSeeOther)
}

// agentChain is the chain of agents of the called agent a call id
// "<call>/<child call>" waits in, as "triage → billing"; empty for the
// turn's own calls. A call further down ("<call>/<call>/<child call>")
// waits in the agent whose turn is the top turn's id and the call id's
// path; when that agent is not known, the nearest one above it is shown.
func agentChain(top string, agents []results.AgentCall, callID string) string {
	path := callID
	for {
		i := strings.LastIndex(path, "/")
		if i < 0 {
			return ""
		}
		path = path[:i]
		for _, a := range agents {
			if a.Turn == top+"/"+path {
				return strings.Join(a.Chain, " → ")
			}
		}
	}
}

// inboxChangeDelay gathers the card changes of a moment into one notice:
// a turn that parks on three calls reloads the list once.
const inboxChangeDelay = 150 * time.Millisecond

// inboxEvents tells a signed-in inbox page when a call's card or a turn's
// status changed anywhere, so that it fetches its list again: a new
// waiting call appears and an answered one leaves without a reload. A
// notice carries nothing but the fact of a change (no turn, no call): the
// list it fetches applies the key's scopes and users, as the page does.
func (s *Server) inboxEvents(w http.ResponseWriter, r *http.Request) {
	v := s.resolveSession(w, r)
	if v.who == nil {
		fail(w, r, http.StatusUnauthorized, "sign in to the inbox first")
		return
	}
	if !v.who.Has(apikey.Read) {
		fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s does not have the read scope the inbox needs", v.who.Principal))
		return
	}
	if s.opts.Events == nil {
		fail(w, r, http.StatusServiceUnavailable, "live events are off on this gateway (it has no NATS); the inbox reloads by itself instead")
		return
	}
	sub, err := s.opts.Events.Subscribe(r.Context(), stream.Filter{All: true}, 0, s.opts.EventsBuffer)
	if err != nil {
		s.log.Warn("Live events unavailable for the inbox", "error", err)
		w.Header().Set("Retry-After", retryAfter)
		fail(w, r, http.StatusServiceUnavailable, "live events are unavailable right now; the inbox reloads by itself instead")
		return
	}
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(msg string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
		if _, err := w.Write([]byte(msg)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write("retry: 2000\n\n") {
		return
	}
	keep := time.NewTicker(s.opts.EventsKeepAlive)
	defer keep.Stop()
	var notice <-chan time.Time
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				// Lagged or NATS gone: the page reconnects, and refetches
				// its list on reconnecting, so nothing is missed.
				return
			}
			switch ev.Type {
			case stream.TypeCard, stream.TypeStatus, stream.TypeResult:
				if notice == nil {
					notice = time.After(inboxChangeDelay)
				}
			}
		case <-notice:
			notice = nil
			if !write("event: changed\ndata: {}\n\n") {
				return
			}
		case <-keep.C:
			if !write(": keep-alive\n\n") {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
