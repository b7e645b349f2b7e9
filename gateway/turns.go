package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/internal/turnlist"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// retryAfter is what a 503 asks callers to wait, in seconds.
const retryAfter = "5"

// Turn is one entry of GET /v1/turns: what visibility knows, and the
// calls that wait for a person as the turn itself reports them.
type Turn struct {
	turnlist.Turn
	// Summary is the first line of the prompt, as the turn was started.
	Summary string `json:"summary,omitempty"`
	// Waiting are the cards of the calls that wait for a person.
	Waiting []results.Card `json:"waiting"`
	// Error says why Waiting could not be read (no worker answered).
	Error string `json:"error,omitempty"`
	// Agents are the agents this turn called whose turns still run: their
	// waiting calls are in Waiting, under ids <call>/<child call>. When a
	// call waits further down, the agents those called in turn, down to
	// it, follow (their waiting ids, too, as this turn shows them).
	Agents []results.AgentCall `json:"agents,omitempty"`
	// ConnectLinks maps the ids of calls waiting for a connection to the
	// links that start it (connect.go), when OAuth is configured.
	ConnectLinks map[string]string `json:"connect_links,omitempty"`
}

// TurnList is the body of GET /v1/turns.
type TurnList struct {
	Turns []Turn `json:"turns"`
}

func (s *Server) listTurns(w http.ResponseWriter, r *http.Request) {
	f := turnlist.Filter{Status: workflows.Status(r.URL.Query().Get("status")), User: r.URL.Query().Get("user"), Users: principal(r).Users,
		Parent: r.URL.Query().Get("parent")}
	switch c := r.URL.Query().Get("children"); c {
	case "", "false":
	case "true":
		f.Children = true
	default:
		fail(w, r, http.StatusBadRequest, fmt.Sprintf("children must be true or false, not %q", c))
		return
	}
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			fail(w, r, http.StatusBadRequest, fmt.Sprintf("limit must be a whole number between 1 and %d", turnlist.MaxLimit))
			return
		}
		f.Limit = n
	}
	if err := f.Check(); err != nil {
		fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	turns, err := s.list(r.Context(), f)
	if err != nil {
		s.temporalFailure(w, r, "list turns", err)
		return
	}
	for i := range turns {
		turns[i].ConnectLinks = s.connectLinks(r, turns[i].ID, turns[i].User, turns[i].Waiting)
	}
	writeJSON(w, http.StatusOK, TurnList{Turns: turns})
}

// list finds the turns of f and reads the waiting cards of those that
// wait, at most ListConcurrency at a time, all within RespondTimeout.
func (s *Server) list(ctx context.Context, f turnlist.Filter) ([]Turn, error) {
	found, err := turnlist.List(ctx, s.opts.Temporal, f)
	if err != nil {
		return nil, err
	}
	out := make([]Turn, len(found))
	ctx, cancel := context.WithTimeout(ctx, s.opts.RespondTimeout)
	defer cancel()
	sem := make(chan struct{}, s.opts.ListConcurrency)
	var wg sync.WaitGroup
	for i, t := range found {
		out[i] = Turn{Turn: t, Waiting: []results.Card{}}
		// Only a turn that may wait has waiting cards; a turn without
		// TollgateStatus may be one from before the attributes.
		if !t.Open || (t.HasStatus && t.Status != workflows.StatusWaiting) {
			continue
		}
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i].Error = "no worker answered the state query in time"
				return
			}
			defer func() { <-sem }()
			s.fillWaiting(ctx, &out[i])
		})
	}
	wg.Wait()
	return out, nil
}

// fillWaiting asks the turn for its cards and, the first time, Temporal
// for its summary, both at once.
func (s *Server) fillWaiting(ctx context.Context, t *Turn) {
	var wg sync.WaitGroup
	if sum, ok := s.summaries.get(t.RunID); ok {
		t.Summary = sum
	} else {
		wg.Go(func() { t.Summary = s.summary(ctx, t.ID, t.RunID) })
	}
	st, err := s.turns.StateWithOptions(ctx, tollgate.StateOptions{TurnID: t.ID, RunID: t.RunID})
	wg.Wait()
	if err != nil {
		s.log.Debug("State query for the turn list failed", "turn", t.ID, "error", err)
		t.Error = "no worker answered the state query in time"
		return
	}
	deeper := false
	for _, c := range st.Cards {
		if c.State.Waiting() {
			t.Waiting = append(t.Waiting, c)
		}
		// What waits in an agent this turn called is answered through
		// this turn, under the ids the calling card shows.
		if c.Agent != nil && !c.State.Final() {
			t.Waiting = append(t.Waiting, c.Agent.Waiting...)
			t.Agents = append(t.Agents, *c.Agent)
			for _, w := range c.Agent.Waiting {
				deeper = deeper || strings.Count(w.CallID, "/") > 1
			}
		}
	}
	if deeper {
		t.Agents = append(t.Agents, s.nestedAgents(ctx, t.ID, t.Agents)...)
	}
}

// nestedAgents are the agents that the agents of a turn called in turn,
// down to each call that waits: the calling card of the top turn knows
// the calls waiting below it, not who called them. Each level costs a
// state query of the turn above it, so only a wait two or more levels
// down asks; a turn that does not answer leaves its level out.
func (s *Server) nestedAgents(ctx context.Context, top string, direct []results.AgentCall) []results.AgentCall {
	var out []results.AgentCall
	level := direct
	for depth := 1; depth < workflows.MaxAgentDepth && len(level) > 0; depth++ {
		var next []results.AgentCall
		for _, a := range level {
			if !slices.ContainsFunc(a.Waiting, func(w results.Card) bool { return strings.Count(w.CallID, "/") > depth }) {
				continue
			}
			st, err := s.turns.State(ctx, a.Turn)
			if err != nil {
				s.log.Debug("State query of a called agent's turn failed", "turn", a.Turn, "top", top, "error", err)
				continue
			}
			for _, c := range st.Cards {
				if c.Agent != nil && !c.State.Final() && len(c.Agent.Waiting) > 0 {
					// Waiting ids as the top turn shows them.
					nested := *c.Agent
					prefix := strings.TrimPrefix(a.Turn, top+"/") + "/"
					nested.Waiting = make([]results.Card, len(c.Agent.Waiting))
					for i, w := range c.Agent.Waiting {
						w.CallID = prefix + w.CallID
						nested.Waiting[i] = w
					}
					next = append(next, nested)
				}
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

// summary is the turn's static summary (the prompt's first line). It
// never changes for a run, so it is asked for once per run.
func (s *Server) summary(ctx context.Context, id, runID string) string {
	d, err := s.opts.Temporal.DescribeWorkflow(ctx, id, runID)
	if err != nil {
		s.log.Debug("Describe turn failed", "turn", id, "error", err)
		return ""
	}
	sum, err := d.GetStaticSummary()
	if err != nil {
		s.log.Debug("Turn summary unreadable", "turn", id, "error", err)
		return ""
	}
	s.summaries.put(runID, sum)
	return sum
}

// summaryCache maps run ids to summaries. It forgets everything when it
// fills up, which costs one Describe per listed turn once.
type summaryCache struct {
	mu sync.Mutex
	m  map[string]string
}

const maxSummaries = 10000

func (c *summaryCache) get(runID string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[runID]
	return v, ok
}

func (c *summaryCache) put(runID, summary string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxSummaries {
		c.m = map[string]string{}
	}
	c.m[runID] = summary
}

func (s *Server) getTurn(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	run, err := s.reach(ctx, principal(r), id)
	if err != nil {
		s.temporalFailure(w, r, "read the turn", err)
		return
	}
	st, err := s.turns.StateWithOptions(ctx, tollgate.StateOptions{TurnID: id, RunID: run})
	if err != nil {
		s.temporalFailure(w, r, "read the turn", s.noWorker(ctx, err, id))
		return
	}
	if s.opts.Connect != nil && slices.ContainsFunc(st.Cards, func(c results.Card) bool { return c.State == results.StateWaitingConnection }) {
		writeJSON(w, http.StatusOK, struct {
			workflows.State
			ConnectLinks map[string]string `json:"connect_links,omitempty"`
		}{st, s.connectLinks(r, id, s.turnUser(ctx, id), st.Cards)})
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// getCards pages through every card of a turn, across the runs of a turn
// that continued as new: ?offset=N (from 0) and ?limit=M (at most 500).
func (s *Server) getCards(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var page [2]int
	for i, name := range []string{"offset", "limit"} {
		v := r.URL.Query().Get(name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fail(w, r, http.StatusBadRequest, fmt.Sprintf("%s must be a whole number of 0 or more, not %q", name, v))
			return
		}
		page[i] = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	if _, err := s.reach(ctx, principal(r), id); err != nil {
		s.temporalFailure(w, r, "read the turn", err)
		return
	}
	cards, err := s.turns.Cards(ctx, tollgate.CardsOptions{TurnID: id, Offset: page[0], Limit: page[1]})
	if err != nil {
		s.temporalFailure(w, r, "read the turn's cards", s.noWorker(ctx, err, id))
		return
	}
	writeJSON(w, http.StatusOK, cards)
}

// startRequest is the body of POST /v1/turns: the turn's input, and
// optionally its id.
type startRequest struct {
	ID string `json:"id,omitempty"`
	// Rerun asks to re-use the id of a closed turn (the rerun scope).
	Rerun bool `json:"rerun,omitempty"`
	workflows.Input
}

// maxIDLen bounds turn ids we accept (Temporal's own limit is higher).
const maxIDLen = 255

// generatedPrefix starts the ids the gateway (and the starter) make.
// Callers may not choose one: those ids are Tollgate's to hand out, and
// the starter's are short enough to guess.
const generatedPrefix = "tollgate-"

func (s *Server) startTurn(w http.ResponseWriter, r *http.Request) {
	var req startRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	p := principal(r)
	if req.User == "" {
		req.User = p.Principal
	}
	switch {
	case p.Limited() && !p.Reaches(req.User):
		fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s may start turns only for %s, not for %q", p.Principal, strings.Join(p.Users, ", "), req.User))
		return
	case !p.Limited() && req.User != p.Principal:
		fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s may start turns only for %s, not for %q", p.Principal, p.Principal, req.User))
		return
	}
	if (req.Head != "" || len(req.Messages) > 0 || req.Workspace != "") && !p.Has(apikey.History) {
		fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s does not have the %s scope that setting head, messages or workspace needs: they load a stored conversation or workspace", p.Principal, apikey.History))
		return
	}
	if req.Rerun && !p.Has(apikey.Rerun) {
		fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s does not have the %s scope that re-using a closed turn's id needs", p.Principal, apikey.Rerun))
		return
	}
	generated := req.ID == ""
	if generated {
		req.ID = newTurnID()
	} else if err := checkID(req.ID); err != nil {
		fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if err := workflows.ValidateInput(req.Input); err != nil {
		fail(w, r, http.StatusBadRequest, "the turn cannot run: "+err.Error())
		return
	}
	opts := tollgate.StartOptions{
		ID: req.ID,
		// An id names one turn, ever: a closed turn's id taken again would
		// inherit what was made for the old turn (links, a session's next
		// child, answers recorded for it). Only a rerun may take a closed
		// one; nothing takes a running one.
		IDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		// A second POST with the same id must not attach to the first
		// turn as if it had started it.
		ErrorWhenAlreadyStarted: true,
	}
	if req.Rerun {
		opts.IDReusePolicy = enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE
	}
	var run client.WorkflowRun
	var err error
	for attempt := 0; ; attempt++ {
		run, err = s.turns.StartWithOptions(r.Context(), opts, req.Input)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if err == nil || !errors.As(err, &started) {
			break
		}
		// A generated id that is taken (48 random bits: all but never) is
		// ours to replace; a chosen one is the caller's to change.
		if generated && attempt < 2 {
			req.ID = newTurnID()
			opts.ID = req.ID
			continue
		}
		fail(w, r, http.StatusConflict, s.takenID(r.Context(), req.ID))
		return
	}
	if err != nil {
		s.temporalFailure(w, r, "start the turn", err)
		return
	}
	s.log.Info("Turn started through the gateway", "turn", req.ID, "by", p.Principal, "rerun", req.Rerun)
	w.Header().Set("Location", "/v1/turns/"+pathEscape(req.ID))
	writeJSON(w, http.StatusCreated, map[string]string{"id": req.ID, "run_id": run.GetRunID()})
}

// takenID says why a start under id was refused: a turn runs under it,
// or one did.
func (s *Server) takenID(ctx context.Context, id string) string {
	d, err := s.opts.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err == nil && d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Sprintf("a turn with id %s existed before; an id names one turn only, so choose another", id)
	}
	return fmt.Sprintf("a turn with id %s is already running; choose another id", id)
}

func newTurnID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return generatedPrefix + hex.EncodeToString(b)
}

// checkID says what makes a caller's turn id unfit. Besides printable and
// bounded, an id stays out of the names Tollgate gives workflows itself:
// those with a "/" (a session's turns, <session>/turn-<n>; webhook
// deliveries, <run>/<type>/<call>/<n>) and the generated tollgate-<hex>.
func checkID(id string) error {
	if len(id) > maxIDLen {
		return fmt.Errorf("id is longer than %d bytes", maxIDLen)
	}
	if strings.ContainsFunc(id, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) {
		return fmt.Errorf("id must be printable and contain no spaces")
	}
	if strings.Contains(id, "/") {
		return fmt.Errorf("id must not contain /: ids with one are the turns of sessions and Tollgate's own workflows")
	}
	if len(id) >= len(generatedPrefix) && strings.EqualFold(id[:len(generatedPrefix)], generatedPrefix) {
		return fmt.Errorf("id must not start with %s: the prefix %s is reserved for the ids Tollgate makes (leave id out to get one)", generatedPrefix, generatedPrefix)
	}
	return nil
}

func pathEscape(id string) string {
	return strings.ReplaceAll(strings.ReplaceAll(id, "%", "%25"), "/", "%2F")
}

// respondRequest is the body of POST /v1/turns/{id}/respond: the respond
// payload without `by`.
type respondRequest struct {
	CallID    string               `json:"call_id"`
	Decision  results.DecisionKind `json:"decision"`
	Reason    string               `json:"reason,omitempty"`
	Arguments json.RawMessage      `json:"arguments,omitempty"`
	Answer    json.RawMessage      `json:"answer,omitempty"`
	// Remember and RememberArgs ask for the approval to be remembered
	// (docs/approvals.md); the turn checks them.
	Remember     string `json:"remember,omitempty"`
	RememberArgs bool   `json:"remember_args,omitempty"`
	// By is decoded only to refuse it: the key decides who answers.
	By *json.RawMessage `json:"by,omitempty"`
}

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 200

func (s *Server) respond(w http.ResponseWriter, r *http.Request) {
	var req respondRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	p := principal(r)
	if req.By != nil {
		fail(w, r, http.StatusBadRequest, fmt.Sprintf("the body must not set by: decisions are recorded as made by the key's principal (%s)", p.Principal))
		return
	}
	if req.CallID == "" {
		fail(w, r, http.StatusBadRequest, "the body names no call_id")
		return
	}
	resp := workflows.Response{CallID: req.CallID, Decision: req.Decision, Reason: req.Reason, Arguments: req.Arguments, Answer: req.Answer, By: p.Principal, Groups: p.Groups, Remember: req.Remember, RememberArgs: req.RememberArgs}
	// Without a key the Client names the Update by the response, so only
	// the same response sent again attaches to the first.
	var updateID string
	k := r.Header.Get("Idempotency-Key")
	if k != "" {
		if len(k) > maxIdempotencyKey || strings.ContainsFunc(k, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
			fail(w, r, http.StatusBadRequest, fmt.Sprintf("Idempotency-Key must be 1 to %d visible ASCII characters", maxIdempotencyKey))
			return
		}
		// Namespaced by principal: one caller's key never attaches to
		// another caller's response.
		updateID = "http:" + p.Principal + ":" + k
	}
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RespondTimeout)
	defer cancel()
	run, err := s.reach(ctx, p, id)
	if err != nil {
		s.temporalFailure(w, r, "read the turn", err)
		return
	}
	// Only a key limited to some tools needs to know which tool the call
	// is of; any other skips the state query.
	if len(p.Tools) > 0 {
		card, err := s.answerableCard(ctx, p, id, run, req.CallID)
		switch {
		case errors.Is(err, errNoCall):
			fail(w, r, http.StatusNotFound, fmt.Sprintf("there is no call %q in turn %s", req.CallID, id))
			return
		case errors.Is(err, errNotYourTool):
			fail(w, r, http.StatusForbidden, fmt.Sprintf("the key of %s may answer only calls of %s; call %s is a %s call", p.Principal, strings.Join(p.Tools, ", "), req.CallID, card.Tool))
			return
		case err != nil:
			s.temporalFailure(w, r, "read the turn", err)
			return
		}
	}
	card, err := s.apply(ctx, tollgate.RespondOptions{TurnID: id, RunID: run, UpdateID: updateID}, resp)
	if err != nil {
		s.respondFailure(w, r, err)
		return
	}
	if k != "" && !s.keyFits(w, r, k, card, resp) {
		return
	}
	s.log.Info("Response applied through the gateway", "turn", id, "call", req.CallID, "decision", req.Decision, "by", p.Principal)
	writeJSON(w, http.StatusOK, card)
}

// errNoCall and errNotYourTool are the refusals of callCard and
// answerableCard, which each caller words for its own page or body.
var (
	errNoCall      = errors.New("no such call")
	errNotYourTool = errors.New("the key may not answer calls of")
)

// callCard reads run runID of the turn (empty: its current run) and
// returns the card of callID, or errNoCall. A state query no worker
// answered in time is errNoWorker.
func (s *Server) callCard(ctx context.Context, turnID, runID, callID string) (results.Card, error) {
	st, err := s.turns.StateWithOptions(ctx, tollgate.StateOptions{TurnID: turnID, RunID: runID})
	if err != nil {
		return results.Card{}, s.noWorker(ctx, err, turnID)
	}
	i := slices.IndexFunc(st.Cards, func(c results.Card) bool { return c.CallID == callID })
	if i >= 0 {
		return st.Cards[i], nil
	}
	// A call waiting in an agent this turn called, as its card shows it.
	for _, c := range st.Cards {
		if c.Agent == nil {
			continue
		}
		if j := slices.IndexFunc(c.Agent.Waiting, func(w results.Card) bool { return w.CallID == callID }); j >= 0 {
			return c.Agent.Waiting[j], nil
		}
	}
	return results.Card{}, fmt.Errorf("%w %q in turn %s", errNoCall, callID, turnID)
}

// answerableCard is callCard for a response from key p: a call of a tool
// the key may not answer is errNotYourTool, with the card, so the refusal
// can name the tool.
func (s *Server) answerableCard(ctx context.Context, p apikey.Entry, turnID, runID, callID string) (results.Card, error) {
	card, err := s.callCard(ctx, turnID, runID, callID)
	if err == nil && !p.MayAnswer(card.Tool) {
		err = fmt.Errorf("%w %s", errNotYourTool, card.Tool)
	}
	return card, err
}

// apply sends the respond Update o names and waits for the card. A
// refusal is a *tollgate.RejectedError; an Update no worker took in time
// is errNoWorker.
func (s *Server) apply(ctx context.Context, o tollgate.RespondOptions, resp workflows.Response) (results.Card, error) {
	card, err := s.turns.RespondWithOptions(ctx, o, resp)
	var rej *tollgate.RejectedError
	if err != nil && !errors.As(err, &rej) {
		err = s.noWorker(ctx, err, o.TurnID)
	}
	return card, err
}

// rejectionStatus is the HTTP status of a response the turn refused: an
// unknown call is not there, a call (or turn) that no longer waits
// conflicts with its state, and anything else did not fit the call.
func rejectionStatus(rej *tollgate.RejectedError) int {
	switch rej.Type {
	case workflows.ErrTypeUnknownCall:
		return http.StatusNotFound
	case workflows.ErrTypeNotWaiting:
		return http.StatusConflict
	}
	return http.StatusUnprocessableEntity
}

// reach resolves turn id for a key limited to some users: the run it
// names now, when that run is one of the key's users' turns. Another
// user's turn is NotFound, as a turn that does not exist is, so the key
// learns nothing of it; the run is pinned so a turn that takes the id
// meanwhile is not the one read or answered. A key without the limit
// gets "" (the current run, whatever it is) and costs no Describe.
func (s *Server) reach(ctx context.Context, p apikey.Entry, id string) (string, error) {
	if !p.Limited() {
		return "", nil
	}
	t, err := s.describeTurn(ctx, id, "")
	if err != nil {
		return "", err
	}
	// Before its first workflow task a turn has no TollgateUser yet: it
	// is nobody's, so a limited key does not see it.
	if !p.Reaches(t.user) {
		return "", serviceerror.NewNotFound("turn not reachable by this key")
	}
	return t.run, nil
}

// turnRef is what Describe says of one run of a turn.
type turnRef struct {
	run, firstRun, user string
	open                bool
}

// describeTurn describes run runID of turn id (empty: the current one).
func (s *Server) describeTurn(ctx context.Context, id, runID string) (turnRef, error) {
	d, err := s.opts.Temporal.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		return turnRef{}, s.noWorker(ctx, err, id)
	}
	info := d.GetWorkflowExecutionInfo()
	t := turnRef{
		run:      info.GetExecution().GetRunId(),
		firstRun: info.GetFirstRunId(),
		open:     info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
	}
	// A server too old to report the chain's first run: the run is its
	// own chain.
	if t.firstRun == "" {
		t.firstRun = t.run
	}
	if p := info.GetSearchAttributes().GetIndexedFields()[workflows.UserAttr.GetName()]; p != nil {
		if err := converter.GetDefaultDataConverter().FromPayload(p, &t.user); err != nil {
			t.user = ""
		}
	}
	return t, nil
}

// errNoWorker is a request no worker answered in time.
var errNoWorker = errors.New("no worker answered")

// noWorker sorts a timeout out of err: the caller's deadline (the
// gateway's RespondTimeout) passing while Temporal waited for a worker.
func (s *Server) noWorker(ctx context.Context, err error, turnID string) error {
	var timeout *client.WorkflowUpdateServiceTimeoutOrCanceledError
	var deadline *serviceerror.DeadlineExceeded
	if ctx.Err() != nil || errors.As(err, &timeout) || errors.As(err, &deadline) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w for turn %s: %v", errNoWorker, turnID, err)
	}
	return err
}

// respondFailure writes the status of a response that was not applied.
func (s *Server) respondFailure(w http.ResponseWriter, r *http.Request, err error) {
	var rej *tollgate.RejectedError
	if errors.As(err, &rej) {
		fail(w, r, rejectionStatus(rej), rej.Reason)
		return
	}
	if errors.Is(err, errNoWorker) {
		w.Header().Set("Retry-After", retryAfter)
		fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("no worker took the response within %s; it may still be applied when one starts. Send the same request again (with the same Idempotency-Key): it is applied at most once", s.opts.RespondTimeout))
		return
	}
	s.temporalFailure(w, r, "send the response", err)
}

// temporalFailure writes the status of a Temporal call that failed for a
// reason other than a refusal.
func (s *Server) temporalFailure(w http.ResponseWriter, r *http.Request, doing string, err error) {
	var nf *serviceerror.NotFound
	switch {
	case errors.Is(err, errNoWorker):
		w.Header().Set("Retry-After", retryAfter)
		fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("no worker answered within %s; try again when a worker runs", s.opts.RespondTimeout))
	case errors.As(err, &nf) && r.PathValue("id") != "":
		fail(w, r, http.StatusNotFound, fmt.Sprintf("there is no turn %s", r.PathValue("id")))
	case status.Code(err) == codes.Unavailable || errors.Is(err, context.DeadlineExceeded):
		s.log.Warn("Temporal unavailable", "doing", doing, "error", err)
		w.Header().Set("Retry-After", retryAfter)
		fail(w, r, http.StatusServiceUnavailable, "Temporal is not reachable; try again shortly")
	case errors.Is(err, context.Canceled):
		// The caller went away; nobody reads the answer.
	default:
		s.internal(w, r, doing, err)
	}
}
