package workflows

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// A turn that grows continues as new: the same workflow id, a new run
// that carries what the turn needs (docs/turns.md, "Long turns"). It does
// so between steps, before the next model call, and while a step is
// parked on people, since Signals and Updates grow a parked turn's
// history from outside. It never does so while a tool runs: an activity
// of the old run would be lost with it.

// longTurnsVersion of the turn's change marker continues a grown turn as
// new, bounds the cards that state and the result show in full, and
// answers the cards query.
const longTurnsVersion = setupFailedVersion + 1

func (t *turn) long() bool { return t.v >= longTurnsVersion }

// Thresholds at which a run hands on. They sit well under the history
// guard's defaults (20,000 events, 20 MiB), so the guard only ever ends a
// turn flooded within one step, and under the server's 10,000 Signals and
// 2,000 Updates per run. The server's own suggestion (4,096 events or
// 4 MiB by default) usually comes first.
const (
	continueEvents = 8_000
	continueBytes  = 8 << 20
)

// continueLimits are the thresholds for this turn: lower ones for a
// policy that lowers the guard's limits, so a run hands on before the
// guard ends it.
func (p Policy) continueLimits() (events, bytes int) {
	maxEvents, maxBytes := p.historyLimits()
	return min(continueEvents, maxEvents*2/5), min(continueBytes, maxBytes*2/5)
}

// Bounds on what state and the result show in full: every waiting call,
// and the most recent stateCards others. The rest are counted, and pages
// of them come from the cards query.
const (
	stateCards = 100
	// maxCardsPage bounds one answer of the cards query.
	maxCardsPage = 500
	// maxCarriedSuffixes bounds the reused call ids whose next suffix a
	// run hands on; past it the next run finds free suffixes by probing.
	maxCarriedSuffixes = 256
)

// CardsQuery pages through every card of a turn, in call order.
const CardsQuery = "cards"

// CardsPage asks for up to Limit cards from the Offset-th call of the
// turn (counting from 0 across all its runs).
type CardsPage struct {
	Offset int `json:"offset"`
	Limit  int `json:"limit,omitempty"`
}

// Cards is one answer of the cards query. A run holds the cards of the
// calls that ended in it (and those of its unfinished step); Runs says
// which earlier run holds the others, so a client asks that run, by its
// run id, for an offset before First.
type Cards struct {
	Cards []results.Card `json:"cards"`
	// Offset is the turn-wide index of Cards[0].
	Offset int `json:"offset"`
	// First and Total: this run holds calls [First, Total); Total counts
	// every call of the turn so far.
	First int `json:"first"`
	Total int `json:"total"`
	// Runs are the earlier runs of the turn, oldest first.
	Runs []RunCards `json:"runs,omitempty"`
}

// RunCards names the calls an earlier run of the turn holds.
type RunCards struct {
	RunID string `json:"run_id"`
	First int    `json:"first"`
	Count int    `json:"count"`
}

// CardCounts counts cards that state and the result do not show in full.
type CardCounts struct {
	Total   int                   `json:"total"`
	ByState map[results.State]int `json:"by_state,omitempty"`
}

func (c *CardCounts) add(card results.Card) {
	c.Total++
	if c.ByState == nil {
		c.ByState = map[results.State]int{}
	}
	c.ByState[card.State]++
}

// Continued is what one run of a turn hands the next. The turn writes it;
// a caller starting a turn leaves it empty (the gateway refuses it).
type Continued struct {
	// Runs are the runs before this one, oldest first.
	Runs []RunCards `json:"runs"`
	Step int        `json:"step"`
	// Sent says how many of Input.Messages Input.Head already covers: the
	// model reply the turn continues after is among them, so that the
	// result shows it, but it is never sent again.
	Sent     int         `json:"sent"`
	Usage    model.Usage `json:"usage"`
	Text     string      `json:"text,omitempty"`
	WorkDir  string      `json:"work_dir,omitempty"`
	Pin      string      `json:"pin,omitempty"`
	Features Features    `json:"features"`
	// Specs are the tools as described when the turn started: a worker
	// redeployed mid-turn does not change a turn's approvals or retries.
	Specs []tool.Spec `json:"specs,omitempty"`
	// Calls are the unfinished step's calls, in call order; empty when the
	// run handed on between steps.
	Calls []CarriedCall `json:"calls,omitempty"`
	// Recent are the last cards of earlier runs, oldest first; Earlier
	// counts the cards of earlier runs not among them.
	Recent  []results.Card `json:"recent,omitempty"`
	Earlier CardCounts     `json:"earlier"`
	// CallIDs holds a hash of every call id of earlier runs (8 bytes each,
	// base64), so a model that reuses ids still gets ones unique in the
	// turn; Suffixes the next suffix of the ids reused most recently.
	CallIDs           string         `json:"call_ids,omitempty"`
	Suffixes          map[string]int `json:"suffixes,omitempty"`
	InvalidSignals    int            `json:"invalid_signals,omitempty"`
	LastInvalidSignal string         `json:"last_invalid_signal,omitempty"`
	// The turn's budget as people raised it, what counts against it, and
	// when the turn's first run began.
	Budget      Budget    `json:"budget,omitempty"`
	BudgetWaits int       `json:"budget_waits,omitempty"`
	ToolCalls   int       `json:"tool_calls,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	// Cost, Unpriced and UnpricedOK are the turn's cost so far.
	Cost       float64 `json:"cost,omitempty"`
	Unpriced   int     `json:"unpriced,omitempty"`
	UnpricedOK bool    `json:"unpriced_ok,omitempty"`
	// Full, Compactions and ContextTokens are the turn's compaction
	// state: the whole conversation's head once it compacted, how often
	// it did, and the last model call's input and output tokens.
	Full          string          `json:"full,omitempty"`
	Compactions   int             `json:"compactions,omitempty"`
	ContextTokens int             `json:"context_tokens,omitempty"`
	LastCall      *ModelCallUsage `json:"last_call,omitempty"`
}

// CarriedCall is one call of the step a run handed on.
type CarriedCall struct {
	Card results.Card `json:"card"`
	// WaitingSince is when the call's current wait began, so the response
	// timeout counts from then, not from the new run's start.
	WaitingSince time.Time `json:"waiting_since,omitempty"`
	Applied      int       `json:"applied,omitempty"`
	Runs         int       `json:"runs,omitempty"`
}

// checkContinued bounds what a run was handed: the turn writes it, but
// anyone who can start a turn can too.
func checkContinued(in Input) error {
	c := in.Continued
	if c == nil {
		return nil
	}
	if err := continuedFields(in, c); err != nil {
		return fmt.Errorf("continued is what a turn hands its next run (leave it empty): %w", err)
	}
	return nil
}

func continuedFields(in Input, c *Continued) error {
	if len(c.Runs) == 0 {
		return fmt.Errorf("runs is empty")
	}
	next := 0
	for i, r := range c.Runs {
		if r.RunID == "" || len(r.RunID) > maxCallIDBytes || r.First != next || r.Count < 0 {
			return fmt.Errorf("runs[%d] does not follow the run before it", i)
		}
		next = r.First + r.Count
	}
	if c.Step < 1 || c.Sent < 0 || c.Sent > len(in.Messages) || c.InvalidSignals < 0 || c.Earlier.Total < 0 {
		return fmt.Errorf("step, sent, invalid_signals or earlier.total is out of range")
	}
	if in.Prompt != "" {
		return fmt.Errorf("a continued turn has no prompt of its own")
	}
	if len(c.Calls) > maxCallsPerStepCeiling {
		return fmt.Errorf("calls has %d entries; a step has at most %d", len(c.Calls), maxCallsPerStepCeiling)
	}
	if len(c.Recent) > stateCards {
		return fmt.Errorf("recent has %d cards; a run hands on at most %d", len(c.Recent), stateCards)
	}
	if len(c.Suffixes) > maxCarriedSuffixes {
		return fmt.Errorf("suffixes has %d entries; a run hands on at most %d", len(c.Suffixes), maxCarriedSuffixes)
	}
	if _, err := decodeIDs(c.CallIDs); err != nil {
		return err
	}
	if c.Compactions < 0 || c.ContextTokens < 0 {
		return fmt.Errorf("compactions or context_tokens is negative")
	}
	if err := checkHead(c.Full); err != nil {
		return fmt.Errorf("full: %w", err)
	}
	if err := maxLen("last_invalid_signal", c.LastInvalidSignal, maxReasonBytes); err != nil {
		return err
	}
	for i, cc := range c.Calls {
		if cc.Card.CallID == "" || len(cc.Card.CallID) > maxCallIDBytes+maxCallIDSuffixBytes || !(cc.Card.State.Final() || cc.Card.State.Waiting()) {
			return fmt.Errorf("calls[%d] is not the card of a call that waits or has ended", i)
		}
		if cc.Card.State == results.StateWaitingAnswer && cc.Card.Interrupt == nil {
			return fmt.Errorf("calls[%d] waits for an answer to no question", i)
		}
		if cc.Card.State == results.StateWaitingConnection && cc.Card.Connection == nil {
			return fmt.Errorf("calls[%d] waits for no connection", i)
		}
	}
	return nil
}

// grown reports whether this run should hand on: the server suggests it,
// or the history passed the turn's thresholds.
func (t *turn) grown(ctx workflow.Context) bool {
	if t.head == "" || t.sent == 0 || t.tailDeferred() {
		// Without a stored conversation the next run could not continue
		// it; such a turn runs until its history guard. A deferred tail
		// is stored first (tailDue).
		return false
	}
	return t.handOnDue(ctx)
}

// handOnDue reports whether the run has grown enough to hand on, stored
// conversation or not.
func (t *turn) handOnDue(ctx workflow.Context) bool {
	if !t.long() {
		return false
	}
	info := workflow.GetInfo(ctx)
	events, bytes := t.in.Policy.continueLimits()
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= events || info.GetCurrentHistorySize() >= bytes
}

// parked reports whether a step can be handed on as it stands: every
// call that is not final waits for a person with no answer taken yet and
// no preview in flight, and nothing else of the run is in flight (an
// Update handler, a webhook delivery being started).
func (t *turn) parked(ctx workflow.Context, step []*call) bool {
	waiting := false
	for _, c := range step {
		switch {
		case c.card.State.Final():
		case c.card.State.Waiting() && c.pending == nil && !c.previewing && c.waiting:
			waiting = true
		default:
			return false
		}
	}
	return waiting && t.deliveries == 0 && workflow.AllHandlersFinished(ctx)
}

// takeSignals handles the respond Signals that arrived but were not read
// yet, so none is lost with the run. It reports whether one was accepted:
// a call then runs, and the step cannot be handed on.
func (t *turn) takeSignals(ctx workflow.Context) bool {
	ch := workflow.GetSignalChannel(ctx, RespondName)
	accepted := false
	for {
		var payload converter.RawValue
		if !ch.ReceiveAsync(&payload) {
			return accepted
		}
		if t.takeSignal(ctx, payload) {
			accepted = true
		}
	}
}

// continueAsNew hands the turn to a new run. step is the unfinished step
// when the run hands on mid-step, nil between steps.
func (t *turn) continueAsNew(ctx workflow.Context, step []*call) error {
	info := workflow.GetInfo(ctx)
	c := &Continued{
		Runs:              append(slices.Clone(t.runsBefore), RunCards{RunID: info.WorkflowExecution.RunID, First: t.first, Count: len(t.calls) - len(step)}),
		Step:              t.step,
		Sent:              1,
		Usage:             t.usage,
		Text:              t.text,
		WorkDir:           t.workDir,
		Pin:               t.pin,
		Features:          t.features,
		Specs:             t.specsInOrder(),
		Earlier:           t.earlier,
		InvalidSignals:    t.invalidSignals,
		LastInvalidSignal: t.lastInvalidSignal,
		Budget:            t.budget,
		BudgetWaits:       t.budgetWaits,
		ToolCalls:         t.toolCalls,
		StartedAt:         t.startedAt,
		Cost:              t.cost,
		Unpriced:          t.unpriced,
		UnpricedOK:        t.unpricedOK,
		Full:              t.full,
		Compactions:       t.compactions,
		ContextTokens:     t.contextTokens,
		LastCall:          t.lastCall,
	}
	ended := t.calls[:len(t.calls)-len(step)]
	recent := append(slices.Clone(t.recent), cardsOf(ended)...)
	if n := len(recent) - stateCards; n > 0 {
		for _, card := range recent[:n] {
			c.Earlier.add(card)
		}
		recent = recent[n:]
	}
	c.Recent = recent
	ids := maps.Clone(t.earlierIDs)
	for _, e := range ended {
		ids.add(e.card.CallID)
	}
	c.CallIDs = ids.encode()
	c.Suffixes = t.carriedSuffixes()
	for _, s := range step {
		c.Calls = append(c.Calls, CarriedCall{Card: s.card, WaitingSince: s.waitingSince, Applied: s.applied, Runs: s.runs})
	}
	t.handedOn = len(step)
	next := t.in
	// The model reply the turn continues after, then what the store does
	// not hold yet: the tool results of the last step.
	next.Prompt, next.Head, next.Messages = "", t.head, slices.Clone(t.conv[t.sent-1:])
	next.Continued = c
	if t.session != nil {
		// As people raised it.
		next.SessionBudget = t.session
	}
	workflow.GetLogger(ctx).Info("Turn continues as new", "step", t.step, "events", info.GetCurrentHistoryLength(), "bytes", info.GetCurrentHistorySize(), "waiting_calls", len(step))
	t.publish(ctx)
	return workflow.NewContinueAsNewError(ctx, WorkflowName, next)
}

// restore takes up what the run before handed on.
func (t *turn) restore(c *Continued) error {
	ids, err := decodeIDs(c.CallIDs)
	if err != nil {
		return err
	}
	t.cont = c
	t.runsBefore = c.Runs
	last := c.Runs[len(c.Runs)-1]
	t.first = last.First + last.Count
	t.step, t.usage, t.text, t.workDir, t.pin = c.Step, c.Usage, c.Text, c.WorkDir, c.Pin
	t.features = c.Features
	t.recent, t.earlier = c.Recent, c.Earlier
	t.earlierIDs = ids
	//workflowcheck:ignore copying a map does not depend on its order
	for id, n := range c.Suffixes {
		t.nextSuffix[id] = n
	}
	t.invalidSignals, t.lastInvalidSignal = c.InvalidSignals, c.LastInvalidSignal
	t.budget, t.budgetWaits, t.toolCalls, t.startedAt = c.Budget, c.BudgetWaits, c.ToolCalls, c.StartedAt
	t.cost, t.unpriced, t.unpricedOK = c.Cost, c.Unpriced, c.UnpricedOK
	t.full, t.compactions, t.contextTokens, t.lastCall = c.Full, c.Compactions, c.ContextTokens, c.LastCall
	t.sent = c.Sent
	for _, cc := range c.Calls {
		cl := &call{card: cc.Card, waitingSince: cc.WaitingSince, applied: cc.Applied, runs: cc.Runs, resumed: cc.Card.State.Waiting(), handed: true}
		cl.spec = t.specs[cc.Card.Tool]
		t.calls = append(t.calls, cl)
		t.byID[cl.card.CallID] = cl
		t.carried = append(t.carried, cl)
	}
	return nil
}

// specsInOrder are the turn's tools in the order the model is offered
// them, so that the next run offers them in the same order.
func (t *turn) specsInOrder() []tool.Spec {
	out := make([]tool.Spec, len(t.defs))
	for i, d := range t.defs {
		out[i] = t.specs[d.Name]
	}
	return out
}

// carriedSuffixes is the next suffix of at most maxCarriedSuffixes reused
// ids, the ones with the highest suffixes first (those cost the most to
// probe for again).
func (t *turn) carriedSuffixes() map[string]int {
	if len(t.nextSuffix) == 0 {
		return nil
	}
	ids := make([]string, 0, len(t.nextSuffix))
	//workflowcheck:ignore keys are sorted before use
	for id := range t.nextSuffix {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if a, b := t.nextSuffix[ids[i]], t.nextSuffix[ids[j]]; a != b {
			return a > b
		}
		return ids[i] < ids[j]
	})
	out := map[string]int{}
	for _, id := range ids[:min(len(ids), maxCarriedSuffixes)] {
		out[id] = t.nextSuffix[id]
	}
	return out
}

func cardsOf(calls []*call) []results.Card {
	out := make([]results.Card, len(calls))
	for i, c := range calls {
		out[i] = c.card
	}
	return out
}

// shownCards are the cards state and the result show in full, and a count
// of the others: every waiting call and the stateCards most recent ones of
// the whole turn. Before longTurnsVersion a turn shows every card.
func (t *turn) shownCards() ([]results.Card, *CardCounts) {
	if !t.long() {
		return t.cards(), nil
	}
	all := len(t.recent) + len(t.calls)
	if all <= stateCards && t.earlier.Total == 0 {
		return append(slices.Clone(t.recent), t.cards()...), nil
	}
	omitted := t.earlier
	omitted.ByState = maps.Clone(t.earlier.ByState)
	cut := all - stateCards
	var out []results.Card
	for i, card := range t.recent {
		if i < cut {
			omitted.add(card)
			continue
		}
		out = append(out, card)
	}
	for i, c := range t.calls {
		if len(t.recent)+i < cut && !c.card.State.Waiting() {
			omitted.add(c.card)
			continue
		}
		out = append(out, c.card)
	}
	return out, &omitted
}

// cardsPage answers the cards query from this run's calls.
func (t *turn) cardsPage(p CardsPage) (Cards, error) {
	if p.Offset < 0 || p.Limit < 0 {
		return Cards{}, fmt.Errorf("offset and limit must not be negative")
	}
	limit := p.Limit
	if limit == 0 || limit > maxCardsPage {
		limit = maxCardsPage
	}
	held := t.calls[:len(t.calls)-t.handedOn]
	// A run that handed on mid-step answers for the calls it holds only.
	out := Cards{Offset: p.Offset, First: t.first, Total: t.first + len(held), Runs: t.runsBefore, Cards: []results.Card{}}
	for i := max(p.Offset-t.first, 0); i < len(held) && len(out.Cards) < limit; i++ {
		if len(out.Cards) == 0 {
			out.Offset = t.first + i
		}
		out.Cards = append(out.Cards, held[i].card)
	}
	return out, nil
}

// idSet holds hashes of call ids, 8 bytes each: enough to keep ids unique
// across runs without carrying the ids themselves.
type idSet map[uint64]struct{}

func idHash(id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return h.Sum64()
}

func (s idSet) has(id string) bool {
	_, ok := s[idHash(id)]
	return ok
}

func (s idSet) add(id string) { s[idHash(id)] = struct{}{} }

// encode writes the set sorted, so the same set is always the same text.
func (s idSet) encode() string {
	keys := make([]uint64, 0, len(s))
	//workflowcheck:ignore keys are sorted before use
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := make([]byte, 8*len(keys))
	for i, k := range keys {
		binary.BigEndian.PutUint64(b[8*i:], k)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func decodeIDs(s string) (idSet, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%8 != 0 {
		return nil, fmt.Errorf("call_ids is not a set of call id hashes")
	}
	out := make(idSet, len(b)/8)
	for i := 0; i < len(b); i += 8 {
		out[binary.BigEndian.Uint64(b[i:])] = struct{}{}
	}
	return out, nil
}
