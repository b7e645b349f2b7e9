package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/results"
)

// AgentSession is the AgentSession workflow on a deployment without
// search attributes or webhooks.
func AgentSession(ctx workflow.Context, in SessionInput) (SessionResult, error) {
	return Features{}.AgentSession(ctx, in)
}

// AgentSession is one conversation of many turns. Messages arrive through
// the send Update or Signal and wait in a queue; each becomes a child
// AgentTurn, one at a time, which continues the conversation from the
// transcript head the turn before left. The session continues as new
// after TurnsPerRun turns, or when Temporal suggests it, carrying the
// head, its settings, its counters, the last RecentTurns turns and the
// queue. A turn that transfers ends the session with status transferred:
// the conversation belongs to the agent it names from then on.
func (f Features) AgentSession(ctx workflow.Context, in SessionInput) (SessionResult, error) {
	v := workflow.GetVersion(ctx, sessionChange, workflow.DefaultVersion, sessionAgentsVersion)
	checked := v >= sessionCheckedVersion
	if err := validateSession(in); err != nil {
		return SessionResult{}, temporal.NewNonRetryableApplicationError("invalid session input: "+err.Error(), ErrTypeInvalidInput, nil)
	}
	if checked {
		if err := checkCarried(workflow.GetInfo(ctx).WorkflowExecution.ID, in.Carried); err != nil {
			return SessionResult{}, temporal.NewNonRetryableApplicationError("invalid session input: "+err.Error(), ErrTypeInvalidInput, nil)
		}
	}
	s := newSession(ctx, in)
	s.checked = checked
	s.resends = v >= sessionResendVersion
	s.agents = v >= sessionAgentsVersion
	if s.agents && in.Carried == nil && in.Turn.Agent != "" {
		s.agent = in.Turn.Agent
		s.holders = []AgentHold{{Agent: s.agent, Since: workflow.Now(ctx)}}
	}
	if v >= sessionBudgetVersion {
		s.budgets = true
		s.startBudget(ctx)
	}
	s.features = f.record(ctx)
	if err := s.register(ctx); err != nil {
		return SessionResult{}, err
	}
	return s.run(ctx)
}

// sessionChange versions the session's behaviour. Version 1
// (sessionCheckedVersion) bounds the sizes in carried, keeps the state it
// carries within those bounds, and bounds send and end payloads and
// refuses text in them that is not UTF-8. Version 2 (sessionResendVersion)
// answers a send retried under its Update id after the session continued
// as new with the turn the first one got (see session.resent). Version 3
// (sessionBudgetVersion) counts what the session's turns use, hands each
// turn the session's budget, and carries both across continue-as-new.
// Version 4 (sessionAgentsVersion) hands the conversation of a session of
// named agents to a transfer's target instead of ending
// (session_agents.go). Sessions whose run started before replay as they
// ran.
const (
	sessionChange         = "session"
	sessionCheckedVersion = 1
	sessionResendVersion  = 2
	sessionBudgetVersion  = sessionResendVersion + 1
	sessionAgentsVersion  = sessionBudgetVersion + 1
)

// The server keeps one Update per id only within a run: a send whose
// answer was lost (a client timeout, a restarting server) and that is
// retried after the session continued as new reaches a run that never saw
// it. The session remembers the Update ids of its last sends, across
// runs, so the retry is the same message. A retry follows its first
// attempt within the caller's timeouts, and fewer messages than the queue
// holds (MaxPending) come between, so it remembers as many sends as it
// keeps turns in detail.
const (
	rememberedSends = RecentTurns
	// maxUpdateIDBytes is the server's default limit on ids.
	maxUpdateIDBytes = 1000
)

// The session's own history guard. Continue-as-new between turns keeps
// a session's history small; these only matter when something floods it
// (Signals, which the server takes without asking the workflow) while a
// turn runs. The session then cancels that turn rather than let the
// server terminate the session and every turn with it.
const (
	sessionMaxHistoryEvents = 10_000
	sessionMaxHistoryBytes  = 10 << 20
)

type session struct {
	in       SessionInput
	features Features
	// checked: the run is at sessionCheckedVersion; resends: at
	// sessionResendVersion, so sends remembers the last sends' Update ids.
	checked bool
	resends bool
	sends   []SentUpdate
	id      string
	perRun  int
	signals workflow.ReceiveChannel

	status   SessionStatus
	head     string
	unstored []results.Message
	// workspace is where the last turn left its files (Result.Workspace):
	// the next turn continues there.
	workspace string

	next    int
	recent  []TurnRecord
	earlier TurnCounts
	pending []Queued
	// current is the running turn, nil while idle; cancelTurn cancels it.
	current    *TurnRecord
	cancelTurn workflow.CancelFunc
	// lastStarted is the id of the last turn whose start resolved, and
	// lastStartErr why it could not start, if it could not.
	lastStarted  string
	lastStartErr string

	runs int
	// runTurns and runSignals count this run's turns and Signals: a run
	// continues as new only once it has done something, so a suggestion
	// the server keeps making cannot loop.
	runTurns   int
	runSignals int

	// ending: end was called, the workflow was cancelled, or a turn
	// transferred; the loop stops after the running turn. continuing:
	// the run is handing over to the next. closed: the result is final.
	ending     bool
	continuing bool
	closed     bool
	endBy      string
	endReason  string
	transfer   *results.Transfer
	// guard says why the history guard cancelled the running turn.
	guard string

	invalidSignals    int
	lastInvalidSignal string

	// agents: the run is at sessionAgentsVersion. agent is the named
	// agent holding the conversation (empty in a session without agents),
	// holders who held it when.
	agents  bool
	agent   string
	holders []AgentHold
	// budgets: the run is at sessionBudgetVersion. budget is the
	// session's budget as people raised it, spent what its turns used,
	// startedAt when its first run began.
	budgets   bool
	budget    Budget
	spent     Spent
	startedAt time.Time
}

func newSession(ctx workflow.Context, in SessionInput) *session {
	s := &session{
		in:      in,
		id:      workflow.GetInfo(ctx).WorkflowExecution.ID,
		perRun:  in.TurnsPerRun,
		signals: workflow.GetSignalChannel(ctx, SendName),
		status:  SessionOpen,
		head:    in.Turn.Head,
		next:    1,
		// Where the last run's turns worked, across continue-as-new.
		workspace: in.Turn.Workspace,
	}
	if s.perRun == 0 {
		s.perRun = DefaultTurnsPerRun
	}
	s.unstored = joined(nil, in.Turn.Messages)
	if c := in.Carried; c != nil {
		s.next = c.Next
		s.recent = append([]TurnRecord(nil), c.Recent...)
		s.earlier = c.Earlier
		s.pending = append([]Queued(nil), c.Pending...)
		s.sends = append([]SentUpdate(nil), c.Sends...)
		s.runs = c.Runs
		s.invalidSignals, s.lastInvalidSignal = c.InvalidSignals, c.LastInvalidSignal
		s.agent, s.holders = c.Agent, append([]AgentHold(nil), c.Holders...)
	}
	return s
}

func validateSession(in SessionInput) error {
	if in.Turn.Prompt != "" {
		return errors.New("turn.prompt must be empty: a session's messages come through send")
	}
	probe := in.Turn
	probe.Prompt = "probe"
	if probe.Agent != "" && probe.Model == "" {
		// The agent's model; each turn resolves the agent it runs.
		probe.Model = "agent"
	}
	if err := validateInput(probe); err != nil {
		return fmt.Errorf("turn: %w", err)
	}
	if err := checkHead(in.Turn.Head); err != nil {
		return fmt.Errorf("turn: %w", err)
	}
	if err := nonNegative("budget", in.Budget); err != nil {
		return err
	}
	if in.TurnsPerRun < 0 || in.TurnsPerRun > MaxTurnsPerRun {
		return fmt.Errorf("turns_per_run is %d; it must be between 1 and %d (or omitted for %d)", in.TurnsPerRun, MaxTurnsPerRun, DefaultTurnsPerRun)
	}
	if c := in.Carried; c != nil && (c.Next < 1 || len(c.Recent) > RecentTurns || len(c.Pending) > MaxPending) {
		return errors.New("carried is not a state a session handed on; leave it empty")
	}
	return nil
}

func (s *session) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, ConversationQuery, func() (Conversation, error) {
		return s.conversation(), nil
	}); err != nil {
		return fmt.Errorf("register conversation query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, SendName, s.onSend, workflow.UpdateHandlerOptions{
		Validator: func(ctx workflow.Context, p converter.RawValue) error {
			m, err := s.readSend(p)
			if err != nil {
				return err
			}
			if _, ok := s.resent(ctx); ok {
				return nil
			}
			return s.validateSend(m)
		},
	}); err != nil {
		return fmt.Errorf("register send update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, EndName, s.onEnd, workflow.UpdateHandlerOptions{
		Validator: func(_ workflow.Context, p converter.RawValue) error {
			e, err := s.readEnd(p)
			if err != nil {
				return err
			}
			return s.validateEnd(e)
		},
	}); err != nil {
		return fmt.Errorf("register end update: %w", err)
	}
	return nil
}

// run is the session's loop: wait (no timers: an idle session costs
// nothing), then end, continue as new, or run the next queued turn.
// Only this loop receives send Signals, so none can be taken by another
// coroutine after the run has handed its queue on.
func (s *session) run(ctx workflow.Context) (SessionResult, error) {
	for !s.ending {
		err := workflow.Await(ctx, func() bool {
			return s.ending || len(s.pending) > 0 || s.signals.Len() > 0 || s.shouldContinue(ctx)
		})
		if err != nil {
			s.close("", "the session workflow was cancelled")
			break
		}
		s.takeSignals(ctx)
		switch {
		case s.ending:
		case s.shouldContinue(ctx):
			if next, ok := s.handOver(ctx); ok {
				return SessionResult{}, workflow.NewContinueAsNewError(ctx, SessionWorkflowName, next)
			}
		case len(s.pending) > 0:
			s.runTurn(ctx)
		}
	}
	return s.finish(ctx)
}

// shouldContinue: the run has taken its turns, Temporal suggests a new
// run, or the history nears the guard's limits; and the run has done
// something since it began.
func (s *session) shouldContinue(ctx workflow.Context) bool {
	if s.runTurns >= s.perRun {
		return true
	}
	if s.runTurns == 0 && s.runSignals == 0 {
		return false
	}
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || s.historyFull(ctx)
}

func (s *session) historyFull(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetCurrentHistoryLength() >= sessionMaxHistoryEvents || info.GetCurrentHistorySize() >= sessionMaxHistoryBytes
}

// handOver drains the run for continue-as-new: every Update handler
// returns first (a send waiting for its turn answers that it is queued),
// then the Signals that arrived meanwhile join the queue. An end that
// arrives during the drain wins: there is no next run.
func (s *session) handOver(ctx workflow.Context) (SessionInput, bool) {
	s.continuing = true
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	_ = workflow.Await(dctx, func() bool { return s.ending || workflow.AllHandlersFinished(dctx) })
	if s.ending {
		s.continuing = false
		return SessionInput{}, false
	}
	s.takeSignals(dctx)
	next := SessionInput{Turn: s.in.Turn, TurnsPerRun: s.in.TurnsPerRun}
	next.Turn.Head, next.Turn.Messages, next.Turn.Workspace = s.head, s.unstored, s.workspace
	next.Carried = &Carried{
		Next:              s.next,
		Recent:            s.recent,
		Earlier:           s.earlier,
		Pending:           s.pending,
		Runs:              s.runs + 1,
		InvalidSignals:    s.invalidSignals,
		LastInvalidSignal: s.lastInvalidSignal,
		Sends:             s.sends,
		Agent:             s.agent,
		Holders:           s.holders,
	}
	if s.budgets {
		spent, started := s.spent, s.startedAt
		next.Carried.Budget, next.Carried.Spent, next.Carried.StartedAt = s.budget, &spent, &started
	}
	workflow.GetLogger(ctx).Info("Session continues as new", "turns", s.runTurns, "pending", len(s.pending), "runs", s.runs+1,
		"history_events", workflow.GetInfo(ctx).GetCurrentHistoryLength())
	return next, true
}

// runTurn runs the next queued message as a child AgentTurn and records
// how it ended.
func (s *session) runTurn(ctx workflow.Context) {
	q := s.pending[0]
	s.pending = append([]Queued(nil), s.pending[1:]...)
	s.runTurns++
	rec := &TurnRecord{ID: q.TurnID, Status: StatusRunning, Text: excerpt(q.Text), By: q.By, StartedAt: workflow.Now(ctx), Agent: s.agent}
	s.current = rec

	in := s.turnInput()
	in.Prompt, in.Head, in.Messages, in.Workspace = q.Text, s.head, s.unstored, s.workspace
	in.SessionBudget = s.turnBudget()
	summary, details := StartSummary(in)
	opts := workflow.ChildWorkflowOptions{
		WorkflowID: q.TurnID,
		// A cancelled turn still answers every call and returns its
		// result; the session waits for it.
		WaitForCancellation: true,
		// A turn's workflow tasks take as long as the session's may.
		WorkflowTaskTimeout: workflow.GetInfo(ctx).WorkflowTaskTimeout,
		// A session that is terminated or times out cancels its turn
		// rather than leave it waiting for a person nobody will ask.
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		StaticSummary:     summary,
		StaticDetails:     details,
	}
	if s.features.SearchAttributes {
		attrs := []temporal.SearchAttributeUpdate{SessionAttr.ValueSet(prefix(s.id, maxByBytes))}
		if in.User != "" {
			attrs = append(attrs, UserAttr.ValueSet(prefix(in.User, maxByBytes)))
		}
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(attrs...)
	}
	cctx, cancel := workflow.WithCancel(ctx)
	s.cancelTurn = cancel
	fut := workflow.ExecuteChildWorkflow(workflow.WithChildOptions(cctx, opts), WorkflowName, in)

	// Waits use a disconnected context: a cancelled session still
	// records how its turn ended (the cancellation reaches the turn
	// through cctx).
	dctx, dcancel := workflow.NewDisconnectedContext(ctx)
	defer dcancel()
	started := fut.GetChildWorkflowExecution()
	s.await(dctx, started)
	err := started.Get(dctx, nil)
	s.lastStarted, s.lastStartErr = q.TurnID, ""
	var res Result
	if err != nil {
		s.lastStartErr = "the turn could not start: " + failureText(err)
	} else {
		s.await(dctx, fut)
		err = fut.Get(dctx, &res)
	}
	s.cancelTurn = nil
	now := workflow.Now(ctx)
	rec.EndedAt = &now
	switch {
	case s.lastStartErr != "":
		rec.Status, rec.Error = StatusFailed, s.lastStartErr
	case err != nil:
		rec.Status, rec.Error = StatusFailed, "the turn failed: "+failureText(err)
		if temporal.IsCanceledError(err) {
			rec.Status = StatusCancelled
		}
	default:
		rec.Status, rec.Reply, rec.Error, rec.Transfer = res.Status, excerpt(res.Text), res.Error, res.Transfer
		s.account(rec, res)
		if s.guard != "" && res.Status == StatusCancelled {
			rec.Error = s.guard
		}
		s.head, s.unstored = continuation(in, res)
		if res.Workspace != "" {
			s.workspace = res.Workspace
		}
	}
	if s.checked {
		// A turn's error is as long as its provider or the server made
		// it; the record carries an excerpt, as it does of the reply.
		rec.Error = excerpt(rec.Error)
	}
	if err != nil {
		// The turn left no result: the message is still the person's
		// part of the conversation, so the next turn is given it.
		s.unstored = joined(s.unstored, []results.Message{results.UserText(q.Text)})
	}
	s.guard = ""
	s.current = nil
	s.keep(*rec)
	if rec.Status == StatusTransferred {
		if s.handsOff() {
			s.handOff(ctx, q.TurnID, res.Transfer)
			return
		}
		s.status, s.transfer, s.ending = SessionTransferred, res.Transfer, true
	}
}

// await waits for f, taking send Signals into the queue as they come and
// cancelling the running turn if the history guard trips.
func (s *session) await(ctx workflow.Context, f workflow.Future) {
	for !f.IsReady() {
		_ = workflow.Await(ctx, func() bool { return f.IsReady() || s.signals.Len() > 0 || s.guardDue(ctx) })
		s.takeSignals(ctx)
		if s.guardDue(ctx) {
			info := workflow.GetInfo(ctx)
			s.guard = fmt.Sprintf("the session's history reached %d events and %d bytes while this turn ran (limits %d and %d), so the session cancelled the turn and continues as new",
				info.GetCurrentHistoryLength(), info.GetCurrentHistorySize(), sessionMaxHistoryEvents, sessionMaxHistoryBytes)
			workflow.GetLogger(ctx).Warn("Cancelling a session's turn: the session's history nears its limit", "invalid_signals", s.invalidSignals)
			s.cancelTurn()
		}
	}
}

func (s *session) guardDue(ctx workflow.Context) bool {
	return s.guard == "" && s.cancelTurn != nil && s.historyFull(ctx)
}

// keep adds a finished turn to the recent ones, counting the oldest out.
func (s *session) keep(rec TurnRecord) {
	s.recent = append(s.recent, rec)
	for len(s.recent) > RecentTurns {
		old := s.recent[0]
		s.recent = append([]TurnRecord(nil), s.recent[1:]...)
		s.earlier.Total++
		if s.earlier.ByStatus == nil {
			s.earlier.ByStatus = map[Status]int{}
		}
		s.earlier.ByStatus[old.Status]++
	}
}

// readSend and readEnd read the payloads by hand, so that whatever
// arrives is answered with a sentence; a payload that is not one is an
// invalid message.
func (s *session) readSend(p converter.RawValue) (Send, error) {
	var m Send
	if err := readPayload(p, sendPayload, s.checked, &m); err != nil {
		return Send{}, invalidMessage(err.Error())
	}
	return m, nil
}

func (s *session) readEnd(p converter.RawValue) (End, error) {
	var e End
	if err := readPayload(p, endPayload, s.checked, &e); err != nil {
		return End{}, invalidMessage(err.Error())
	}
	return e, nil
}

func (s *session) onSend(ctx workflow.Context, p converter.RawValue) (Sent, error) {
	m, err := s.readSend(p)
	if err != nil {
		return Sent{}, err
	}
	if sent, ok := s.resent(ctx); ok {
		return sent, nil
	}
	if err := s.validateSend(m); err != nil {
		return Sent{}, err
	}
	id := s.enqueue(ctx, m)
	s.remember(ctx, id)
	if s.current != nil || len(s.pending) > 1 || s.continuing {
		return Sent{TurnID: id, Queued: true}, nil
	}
	// The session is idle, so its loop starts this turn next; answer
	// once it has started, so the caller can talk to it at once.
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	_ = workflow.Await(dctx, func() bool {
		return s.lastStarted == id || ((s.ending || s.continuing) && s.isPending(id))
	})
	switch {
	case s.lastStarted == id && s.lastStartErr != "":
		return Sent{}, temporal.NewNonRetryableApplicationError(s.lastStartErr, ErrTypeInvalidMessage, nil)
	case s.lastStarted == id:
		return Sent{TurnID: id}, nil
	case s.continuing:
		return Sent{TurnID: id, Queued: true}, nil
	}
	return Sent{}, sessionClosed("the session ended before this message's turn started")
}

func (s *session) enqueue(ctx workflow.Context, m Send) string {
	id := fmt.Sprintf("%s/turn-%d", s.id, s.next)
	s.next++
	s.pending = append(s.pending, Queued{TurnID: id, Text: m.Text, By: m.By, At: workflow.Now(ctx)})
	return id
}

// resent is the answer to a send whose Update id an earlier run took
// (the server answers retries within a run itself): the turn it got.
func (s *session) resent(ctx workflow.Context) (Sent, bool) {
	if !s.resends {
		return Sent{}, false
	}
	id := workflow.GetCurrentUpdateInfo(ctx).ID
	for _, r := range s.sends {
		if r.UpdateID == id {
			return Sent{TurnID: r.TurnID, Queued: s.isPending(r.TurnID)}, true
		}
	}
	return Sent{}, false
}

// remember keeps the Update id of the send that queued turn, the last
// rememberedSends of them.
func (s *session) remember(ctx workflow.Context, turn string) {
	if !s.resends {
		return
	}
	id := workflow.GetCurrentUpdateInfo(ctx).ID
	if len(id) > maxUpdateIDBytes {
		return
	}
	s.sends = append(s.sends, SentUpdate{UpdateID: id, TurnID: turn})
	if len(s.sends) > rememberedSends {
		s.sends = append([]SentUpdate(nil), s.sends[len(s.sends)-rememberedSends:]...)
	}
}

func (s *session) isPending(id string) bool {
	for _, q := range s.pending {
		if q.TurnID == id {
			return true
		}
	}
	return false
}

// validateSend is the send Update's validator and the Signal's check. It
// reads and never writes; each error is a sentence a person can act on.
func (s *session) validateSend(m Send) error {
	if s.status != SessionOpen || s.ending {
		return sessionClosed(fmt.Sprintf("the session has ended (%s); it takes no more messages", s.endedStatus()))
	}
	switch {
	case strings.TrimSpace(m.Text) == "":
		return invalidMessage("the message is empty")
	case len(m.Text) > MaxMessageBytes:
		return invalidMessage(fmt.Sprintf("the message is %d bytes; it may be at most %d", len(m.Text), MaxMessageBytes))
	case len(m.By) > maxByBytes:
		return invalidMessage(fmt.Sprintf("by is %d bytes; it may be at most %d", len(m.By), maxByBytes))
	case len(s.pending) >= MaxPending:
		return invalidMessage(fmt.Sprintf("%d messages already wait for their turn; send this one once the session has caught up", len(s.pending)))
	}
	return nil
}

func (s *session) endedStatus() SessionStatus {
	if s.status == SessionOpen {
		return SessionEnded
	}
	return s.status
}

func (s *session) validateEnd(e End) error {
	if s.status != SessionOpen || s.ending {
		return sessionClosed(fmt.Sprintf("the session has already ended (%s)", s.endedStatus()))
	}
	if len(e.By) > maxByBytes {
		return invalidMessage(fmt.Sprintf("by is %d bytes; it may be at most %d", len(e.By), maxByBytes))
	}
	if len(e.Reason) > maxReasonBytes {
		return invalidMessage(fmt.Sprintf("reason is %d bytes; it may be at most %d", len(e.Reason), maxReasonBytes))
	}
	return nil
}

// onEnd closes the session: a running turn is cancelled (it answers
// every call and returns), queued messages stay unanswered, and the
// Update returns the final conversation.
func (s *session) onEnd(ctx workflow.Context, p converter.RawValue) (Conversation, error) {
	e, err := s.readEnd(p)
	if err != nil {
		return Conversation{}, err
	}
	if err := s.validateEnd(e); err != nil {
		return Conversation{}, err
	}
	s.close(e.By, e.Reason)
	if s.cancelTurn != nil {
		s.cancelTurn()
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	if err := workflow.Await(dctx, func() bool { return s.closed }); err != nil {
		return Conversation{}, err
	}
	return s.conversation(), nil
}

func (s *session) close(by, reason string) {
	s.ending = true
	s.endBy, s.endReason = by, reason
}

// takeSignals moves send Signals into the queue; an invalid one (or one
// for a full queue, or a closed session) is dropped and counted.
func (s *session) takeSignals(ctx workflow.Context) {
	for {
		var payload converter.RawValue
		if !s.signals.ReceiveAsync(&payload) {
			return
		}
		s.runSignals++
		m, err := s.readSend(payload)
		switch {
		case err != nil:
		case s.closed:
			err = fmt.Errorf("the session has ended (%s); it takes no more messages", s.endedStatus())
		default:
			err = s.validateSend(m)
		}
		if err != nil {
			s.invalidSignals++
			s.lastInvalidSignal = sentence(err)
			if s.checked {
				// Carried on continue-as-new: bounded as checkCarried
				// requires.
				s.lastInvalidSignal = prefix(s.lastInvalidSignal, maxReasonBytes)
			}
			workflow.GetLogger(ctx).Warn("Dropped a send signal", "reason", s.lastInvalidSignal)
			continue
		}
		s.enqueue(ctx, m)
	}
}

// finish lets every handler return, answers for the Signals that came
// too late, and returns the session's last state.
func (s *session) finish(ctx workflow.Context) (SessionResult, error) {
	if s.status == SessionOpen {
		s.status = SessionEnded
	}
	s.closed = true
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	if err := workflow.Await(dctx, func() bool { return workflow.AllHandlersFinished(dctx) }); err != nil {
		return SessionResult{}, fmt.Errorf("wait for the session's update handlers: %w", err)
	}
	s.takeSignals(dctx)
	return SessionResult{Conversation: s.conversation(), Head: s.head, Messages: s.unstored}, nil
}

// conversation is the Query's answer: copies, so a caller holding it
// sees no later change, and excerpts, so it stays small.
func (s *session) conversation() Conversation {
	c := Conversation{
		Status:            s.status,
		Turns:             append([]TurnRecord(nil), s.recent...),
		Earlier:           s.earlier,
		Pending:           make([]Queued, 0, len(s.pending)),
		TurnsStarted:      s.startedCount(),
		Runs:              s.runs,
		InvalidSignals:    s.invalidSignals,
		LastInvalidSignal: s.lastInvalidSignal,
		Transfer:          s.transfer,
		Agent:             s.agent,
		Holders:           append([]AgentHold(nil), s.holders...),
		EndedBy:           s.endBy,
		EndReason:         s.endReason,
	}
	if s.budgets {
		spent := s.spent
		c.Spent = &spent
		if !s.budget.empty() {
			c.Budget = &BudgetState{Limit: s.budget, Spent: spent}
		}
	}
	if s.current != nil {
		c.Running = s.current.ID
		c.Turns = append(c.Turns, *s.current)
		if len(c.Turns) > RecentTurns {
			c.Turns = c.Turns[1:]
		}
	}
	for _, q := range s.pending {
		q.Text = excerpt(q.Text)
		c.Pending = append(c.Pending, q)
	}
	return c
}

// startedCount is how many turns have started: every number handed out
// but those still queued.
func (s *session) startedCount() int {
	return s.next - 1 - len(s.pending)
}

func sessionClosed(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeSessionClosed, nil)
}

func invalidMessage(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeInvalidMessage, nil)
}

// sentence is an error's sentence without the SDK's decorations.
func sentence(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

// failureText says why a child turn ended without a result.
func failureText(err error) string {
	var (
		app  *temporal.ApplicationError
		term *temporal.TerminatedError
		to   *temporal.TimeoutError
	)
	switch {
	case errors.As(err, &app):
		return app.Message()
	case temporal.IsCanceledError(err):
		return "it was cancelled before it could answer"
	case errors.As(err, &term):
		return "it was terminated"
	case errors.As(err, &to):
		return "it timed out"
	}
	return err.Error()
}

// excerpt cuts s at excerptBytes, on a character boundary, marked as the
// model's truncations are.
func excerpt(s string) string {
	if len(s) <= excerptBytes {
		return s
	}
	return prefix(s, excerptBytes) + "\n[truncated]"
}

// prefix is at most n bytes of s, without splitting a character.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
