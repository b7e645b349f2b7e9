package gateway

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// A one-click link is a signed decision (package links). GET shows what it
// would do and a button; only the POST from that page applies it, so mail
// scanners and chat previews that fetch every link decide nothing. Each
// refusal is a page that says which, with its own status code.

type linkView struct {
	pageBase
	Turn     string
	Decision results.DecisionKind
	By       string
	Expires  string
	Card     results.Card
	Args     string
	Action   string
	CSRF     string
	Heading  string
}

func (s *Server) linkPage(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	claims, _, card, ok := s.checkLink(w, r, token)
	if !ok {
		return
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	n := base64.RawURLEncoding.EncodeToString(nonce)
	// The nonce cookie binds the page's form to this browser; Strict
	// keeps other sites' forms from sending it.
	http.SetCookie(w, &http.Cookie{
		Name: linkCookie, Value: n, Path: "/v1/links/", MaxAge: int(time.Hour.Seconds()),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	page := s.linkView(claims, card, token)
	page.CSRF = s.linkCSRF(n, token)
	render(w, http.StatusOK, "link", page.Nonce, page)
}

func (s *Server) linkApply(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	if s.opts.Links == nil {
		renderErrorPage(w, http.StatusNotFound, "Links are off", "This gateway does not take one-click links.", "")
		return
	}
	// The signature first: a forged link learns nothing else.
	if _, err := s.opts.Links.VerifyLink(token, time.Now()); err != nil {
		s.linkRefused(w, err)
		return
	}
	if err := r.ParseForm(); err != nil {
		fail(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	if !s.checkLinkCSRF(r, token) {
		renderErrorPage(w, http.StatusForbidden, "Confirm on the link's page",
			"This request did not come from the link's confirmation page (its CSRF token is missing or wrong). Open the link again and press the button there.", "")
		return
	}
	claims, run, _, ok := s.checkLink(w, r, token)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	resp := workflows.Response{CallID: claims.Call, Decision: claims.Decision, By: claims.By}
	if claims.Decision == results.DecisionDeny {
		resp.Reason = "denied through a one-click link"
	}
	// To the run checkLink found: if it ended meanwhile and another took
	// the turn id, the Update finds no run instead of the new one.
	card, err := s.apply(ctx, tollgate.RespondOptions{TurnID: claims.Turn, RunID: run, UpdateID: claims.UpdateID()}, resp)
	if err != nil {
		var rej *tollgate.RejectedError
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			renderErrorPage(w, http.StatusConflict, "No longer waiting",
				fmt.Sprintf("Turn %s ended before this link was applied, so it does nothing.", claims.Turn), "")
		case errors.As(err, &rej):
			renderErrorPage(w, rejectionStatus(rej), "The turn refused this link", rej.Reason+".", "")
		case errors.Is(err, errNoWorker):
			w.Header().Set("Retry-After", retryAfter)
			renderErrorPage(w, http.StatusServiceUnavailable, "No worker is running",
				fmt.Sprintf("No worker took the decision within %s. It may still be applied when one starts; using the link again is safe, it applies at most once.", s.opts.RespondTimeout), "")
		default:
			s.internal(w, r, "apply the link", err)
		}
		return
	}
	s.log.Info("Link applied", "turn", claims.Turn, "call", claims.Call, "decision", claims.Decision, "by", claims.By)
	page := s.linkView(claims, card, token)
	page.Heading = "Approved"
	if claims.Decision == results.DecisionDeny {
		page.Heading = "Denied"
	}
	render(w, http.StatusOK, "done", page.Nonce, page)
}

func (s *Server) linkView(c signedtoken.LinkClaims, card results.Card, token string) linkView {
	nonce := newNonce()
	return linkView{
		pageBase: pageBase{Title: "Confirm " + string(c.Decision), Nonce: nonce},
		Turn:     c.Turn, Decision: c.Decision, By: c.By,
		Expires: c.Expires.UTC().Format("2006-01-02 15:04 UTC"),
		Card:    card, Args: prettyJSON(card.EffectiveArguments()),
		Action: "/v1/links/" + token,
	}
}

// checkLink verifies the token, that the turn is still the one it was
// made for, and that its call still waits with the arguments the link was
// made for. It returns the run to apply it to, and writes each refusal's
// page.
func (s *Server) checkLink(w http.ResponseWriter, r *http.Request, token string) (signedtoken.LinkClaims, string, results.Card, bool) {
	if s.opts.Links == nil {
		renderErrorPage(w, http.StatusNotFound, "Links are off", "This gateway does not take one-click links.", "")
		return signedtoken.LinkClaims{}, "", results.Card{}, false
	}
	claims, err := s.opts.Links.VerifyLink(token, time.Now())
	if err != nil {
		s.linkRefused(w, err)
		return signedtoken.LinkClaims{}, "", results.Card{}, false
	}
	run, ok := s.linkRun(w, r, claims)
	if !ok {
		return signedtoken.LinkClaims{}, "", results.Card{}, false
	}
	card, ok := s.pageCardRun(w, r, claims.Turn, run, claims.Call)
	if !ok {
		return signedtoken.LinkClaims{}, "", results.Card{}, false
	}
	if !card.State.Waiting() {
		if n := len(card.Decisions); n > 0 && card.Decisions[n-1].By == claims.By && card.Decisions[n-1].Decision == claims.Decision {
			d := card.Decisions[n-1]
			renderErrorPage(w, http.StatusConflict, "Link already used",
				fmt.Sprintf("This link was already used: call %s got %s from %s at %s. A link works once.", card.CallID, d.Decision, d.By, d.At.UTC().Format("2006-01-02 15:04 UTC")), "")
			return signedtoken.LinkClaims{}, "", results.Card{}, false
		}
		renderErrorPage(w, http.StatusConflict, "No longer waiting",
			fmt.Sprintf("Call %s of turn %s is %s; it no longer waits for a decision, so this link does nothing.", card.CallID, claims.Turn, card.State), "")
		return signedtoken.LinkClaims{}, "", results.Card{}, false
	}
	if signedtoken.ArgsHash(card.EffectiveArguments()) != claims.ArgsHash {
		renderErrorPage(w, http.StatusConflict, "Arguments changed",
			fmt.Sprintf("The arguments of call %s changed after this link was made, so it cannot decide on them. Review the call in the inbox.", card.CallID), "/inbox")
		return signedtoken.LinkClaims{}, "", results.Card{}, false
	}
	return claims, run, card, true
}

// linkRun finds the run a link may act on: the turn's current run, when
// it belongs to the chain of runs (first run and its continue-as-new
// successors) that claims.Run belongs to. A turn id that names another
// execution now (the old turn closed and the id was taken again) is
// refused: the link was made for the old one.
func (s *Server) linkRun(w http.ResponseWriter, r *http.Request, claims signedtoken.LinkClaims) (string, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	cur, err := s.describeTurn(ctx, claims.Turn, "")
	if err != nil {
		s.pageTurnFailure(w, r, claims.Turn, err)
		return "", false
	}
	if claims.Run == cur.run || claims.Run == cur.firstRun {
		return cur.run, true
	}
	made, err := s.describeTurn(ctx, claims.Turn, claims.Run)
	var nf *serviceerror.NotFound
	switch {
	case err == nil && made.firstRun == cur.firstRun:
		return cur.run, true
	case err == nil || errors.As(err, &nf):
		// Another chain, or a run the server no longer keeps.
		renderErrorPage(w, http.StatusGone, "Link no longer valid",
			fmt.Sprintf("This link was made for an earlier turn with the id %s, which has ended; it does nothing for the turn that has this id now. Decide in the inbox.", claims.Turn), "/inbox")
	default:
		s.pageTurnFailure(w, r, claims.Turn, err)
	}
	return "", false
}

// linkRefused writes the page for a token Verify refused.
func (s *Server) linkRefused(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, signedtoken.ErrExpired):
		renderErrorPage(w, http.StatusGone, "Link expired", "This link has expired. Decide in the inbox, or ask for a new link.", "/inbox")
	case errors.Is(err, signedtoken.ErrUnbound):
		renderErrorPage(w, http.StatusGone, "Link expired",
			"This link was made by an older version of Tollgate that did not bind links to their turn's run, so it no longer works. Decide in the inbox, or ask for a new link.", "/inbox")
	default:
		// ErrTampered, and anything else Verify may add: trust nothing.
		renderErrorPage(w, http.StatusForbidden, "Invalid link", "This link is not valid: it was altered, cut short, or signed with a key this gateway does not have.", "")
	}
}

// pageCard reads the card of a turn's call for a page a person opened
// (a one-click link, a connect link), answering with an error page when
// the turn, its worker or the call is not there.
func (s *Server) pageCard(w http.ResponseWriter, r *http.Request, turn, call string) (results.Card, bool) {
	return s.pageCardRun(w, r, turn, "", call)
}

// pageCardRun is pageCard of the turn's run runID (empty: the current).
func (s *Server) pageCardRun(w http.ResponseWriter, r *http.Request, turn, runID, call string) (results.Card, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	card, err := s.callCard(ctx, turn, runID, call)
	switch {
	case errors.Is(err, errNoCall):
		renderErrorPage(w, http.StatusNotFound, "No such call", fmt.Sprintf("Turn %s has no call %s.", turn, call), "")
		return results.Card{}, false
	case err != nil:
		s.pageTurnFailure(w, r, turn, err)
		return results.Card{}, false
	}
	return card, true
}

// pageTurnFailure writes the page for a turn that could not be read.
func (s *Server) pageTurnFailure(w http.ResponseWriter, r *http.Request, turn string, err error) {
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		renderErrorPage(w, http.StatusNotFound, "No such turn", fmt.Sprintf("There is no turn %s any more.", turn), "")
	case errors.Is(err, errNoWorker):
		w.Header().Set("Retry-After", retryAfter)
		renderErrorPage(w, http.StatusServiceUnavailable, "No worker is running", "No worker answered for this turn; try the link again in a moment.", "")
	default:
		s.internal(w, r, "read the turn", err)
	}
}
