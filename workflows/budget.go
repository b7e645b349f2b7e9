package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// A budget bounds what a turn may use: tokens, model calls, tool calls,
// wall time. Reached, the turn does not fail: before its next model call
// it parks on a turn-level wait, a card of the pseudo-tool "budget" that
// people answer like any approval (the inbox, links, webhooks, starter
// all show it). Approve goes on, with the budget given as the approve's
// arguments or, without arguments, with the same budget again from what
// was used so far; deny stops the turn as budget_exhausted.

// StatusBudgetExhausted: the turn reached its budget and was stopped, by
// policy.on_budget "stop" or by the person who answered its budget wait.
const StatusBudgetExhausted Status = "budget_exhausted"

// BudgetTool is the tool name of a budget wait's card.
const BudgetTool = "budget"

// OnBudget says what a turn does when it reaches its budget.
type OnBudget string

const (
	OnBudgetAsk  OnBudget = "ask"
	OnBudgetStop OnBudget = "stop"
)

// Budget is what a turn may use; zero fields are unbounded.
type Budget struct {
	// Tokens bounds input plus output tokens over every model call.
	Tokens int `json:"tokens,omitempty"`
	// Cost bounds what the model calls cost, in US dollars, as the
	// worker's price table prices them.
	Cost       float64  `json:"cost,omitempty"`
	ModelCalls int      `json:"model_calls,omitempty"`
	ToolCalls  int      `json:"tool_calls,omitempty"`
	WallTime   Duration `json:"wall_time,omitempty"`
}

func (b Budget) empty() bool { return b == Budget{} }

// Spent is what a turn has used, counted against its budget.
type Spent struct {
	Tokens int `json:"tokens"`
	// Cost is in US dollars; Unpriced counts calls of models without a
	// price, whose cost is unknown.
	Cost       float64 `json:"cost,omitempty"`
	Unpriced   int     `json:"unpriced_calls,omitempty"`
	ModelCalls int     `json:"model_calls"`
	ToolCalls  int     `json:"tool_calls"`
	// WallTime is how long the turn has run, at the time it was read.
	WallTime Duration `json:"wall_time"`
}

// budgetSchema is what a budget wait's approve may carry as arguments.
var budgetSchema = mustSchema(`{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "tokens": {"type": "integer", "minimum": 0},
    "cost": {"type": "number", "minimum": 0},
    "model_calls": {"type": "integer", "minimum": 0},
    "tool_calls": {"type": "integer", "minimum": 0},
    "wall_time": {"type": "string"}
  }
}`)

func mustSchema(s string) *tool.Schema {
	schema, err := tool.CompileSchema(json.RawMessage(s))
	if err != nil {
		panic(err)
	}
	return schema
}

func validateBudget(p Policy) error {
	b := p.Budget
	if err := nonNegative("policy.budget", b); err != nil {
		return err
	}
	switch p.OnBudget {
	case "", OnBudgetAsk, OnBudgetStop:
	default:
		return fmt.Errorf("policy.on_budget is %q; it must be ask or stop", p.OnBudget)
	}
	return nil
}

func nonNegative(field string, b Budget) error {
	if b.Tokens < 0 || b.Cost < 0 || b.ModelCalls < 0 || b.ToolCalls < 0 || b.WallTime < 0 {
		return fmt.Errorf("%s limits must not be negative", field)
	}
	return nil
}

// budgetLeft is what the turn may still use: of its budget and of its
// session's, the smaller of each limit, with what it has already used
// taken off. reached names the limits already met before the calling
// tool call (counted already) was made; bounded is false when nothing
// limits the turn.
func (t *turn) budgetLeft(now time.Time) (left Budget, reached []string, bounded bool) {
	before := func(s Spent) Spent {
		s.ToolCalls--
		return s
	}
	if !t.budget.empty() {
		spent := t.spentAt(now)
		reached = overBudget(t.budget, before(spent))
		left, bounded = tighter(left, t.budget.less(spent)), true
	}
	if t.session != nil && !t.session.Limit.empty() {
		spent := t.sessionSpentAt(now)
		reached = append(reached, overBudget(t.session.Limit, before(spent))...)
		left, bounded = tighter(left, t.session.Limit.less(spent)), true
	}
	return left, reached, bounded
}

// less is what is left of b once s is used: only b's limits, each at
// least its smallest unit, since a zero would mean unbounded (callers
// check overBudget first).
func (b Budget) less(s Spent) Budget {
	if b.Tokens > 0 {
		b.Tokens = max(b.Tokens-s.Tokens, 1)
	}
	if b.Cost > 0 {
		b.Cost = max(b.Cost-s.Cost, 1e-9)
	}
	if b.ModelCalls > 0 {
		b.ModelCalls = max(b.ModelCalls-s.ModelCalls, 1)
	}
	if b.ToolCalls > 0 {
		b.ToolCalls = max(b.ToolCalls-s.ToolCalls, 1)
	}
	if b.WallTime > 0 {
		b.WallTime = max(b.WallTime-s.WallTime, Duration(time.Second))
	}
	return b
}

// tighter is, limit by limit, the smaller of a and b, where zero is no
// limit.
func tighter(a, b Budget) Budget {
	lower := func(x, y int) int {
		if x == 0 || (y != 0 && y < x) {
			return y
		}
		return x
	}
	a.Tokens = lower(a.Tokens, b.Tokens)
	a.ModelCalls = lower(a.ModelCalls, b.ModelCalls)
	a.ToolCalls = lower(a.ToolCalls, b.ToolCalls)
	if a.Cost == 0 || (b.Cost != 0 && b.Cost < a.Cost) {
		a.Cost = b.Cost
	}
	if a.WallTime == 0 || (b.WallTime != 0 && b.WallTime < a.WallTime) {
		a.WallTime = b.WallTime
	}
	return a
}

// spentAt is what the turn has used by now, its wall time counted from
// when its first run began.
func (t *turn) spentAt(now time.Time) Spent {
	return Spent{
		Tokens:     t.usage.InputTokens + t.usage.OutputTokens,
		Cost:       t.cost,
		Unpriced:   t.unpricedUnasked(),
		ModelCalls: t.step + t.childSteps,
		ToolCalls:  t.toolCalls,
		WallTime:   Duration(now.Sub(t.startedAt)),
	}
}

// overBudget names each limit the turn has reached, as "3 of 3 tool
// calls"; empty when it may go on.
func overBudget(b Budget, s Spent) []string {
	var out []string
	if b.Tokens > 0 && s.Tokens >= b.Tokens {
		out = append(out, fmt.Sprintf("%d of %d tokens", s.Tokens, b.Tokens))
	}
	if b.Cost > 0 && s.Cost >= b.Cost {
		out = append(out, fmt.Sprintf("$%.4f of $%.4f", s.Cost, b.Cost))
	}
	if b.Cost > 0 && s.Unpriced > 0 {
		// Unknown is not zero: a person decides whether to go on.
		out = append(out, fmt.Sprintf("the cost of %d model calls is unknown (no price for the model)", s.Unpriced))
	}
	if b.ModelCalls > 0 && s.ModelCalls >= b.ModelCalls {
		out = append(out, fmt.Sprintf("%d of %d model calls", s.ModelCalls, b.ModelCalls))
	}
	if b.ToolCalls > 0 && s.ToolCalls >= b.ToolCalls {
		out = append(out, fmt.Sprintf("%d of %d tool calls", s.ToolCalls, b.ToolCalls))
	}
	if b.WallTime > 0 && s.WallTime >= b.WallTime {
		out = append(out, fmt.Sprintf("%s of %s wall time", formatDuration(time.Duration(s.WallTime).Round(time.Second)), formatDuration(time.Duration(b.WallTime))))
	}
	return out
}

// checkBudget runs before each model call. It returns false when the
// turn must stop: the budget is reached and the policy or a person says
// stop. A turn of a session with a budget checks the session's too.
func (t *turn) checkBudget(ctx workflow.Context) bool {
	if !t.long() || (t.budget.empty() && t.session == nil) {
		return true
	}
	now := workflow.Now(ctx)
	spent := t.spentAt(now)
	t.lastSpent = spent
	reached := overBudget(t.budget, spent)
	summary := "the turn reached its budget: " + strings.Join(reached, ", ")
	if t.session != nil {
		t.lastSessionSpent = t.sessionSpentAt(now)
	}
	session := false
	if len(reached) == 0 && t.session != nil {
		spent = t.sessionSpentAt(now)
		reached = overBudget(t.session.Limit, spent)
		summary, session = "the session reached its budget: "+strings.Join(reached, ", "), true
	}
	if len(reached) == 0 {
		return true
	}
	if t.in.Policy.OnBudget == OnBudgetStop {
		t.failure = summary
		return false
	}
	limit := t.budget
	if session {
		limit = t.session.Limit
	}
	c := t.budgetWait(ctx, summary, limit, spent)
	c.sessionBudget = session
	t.emit(ctx, webhook.TypeTurnBudgetReached, c.card.CallID, &c.card)
	asked := c.card.Interrupt
	t.wait(ctx, c)
	if c.card.State != results.StateRunning {
		// Denied, timed out or cancelled: the wait refused the card.
		t.failure = summary + "; " + c.card.Reason
		return false
	}
	raised := limit
	if len(c.card.EditedArguments) > 0 {
		raised = budgetFrom(c.card.EditedArguments)
	} else {
		raised = raised.again(spent)
	}
	if session {
		t.session.Limit = raised
	} else {
		t.budget = raised
	}
	// Having gone on knowing the cost is unknown, the person is not
	// asked about it again.
	t.unpricedOK = true
	c.clear()
	c.card.State = results.StateSucceeded
	// The card keeps what was asked beside how it was answered.
	c.card.Output = &results.Success{Parts: []results.Part{results.TextPart(asked.Prompt + "\nBudget raised to " + raised.String() + ".")}}
	return true
}

// budgetWait adds the turn-level wait's card; its arguments are the
// budget that was reached.
func (t *turn) budgetWait(ctx workflow.Context, summary string, limit Budget, spent Spent) *call {
	t.budgetWaits++
	args, _ := json.Marshal(limit)
	c := &call{spec: tool.Spec{Name: BudgetTool}, budget: true}
	c.card = results.Card{
		CallID:    fmt.Sprintf("budget_%d", t.budgetWaits),
		Tool:      BudgetTool,
		Arguments: args,
		State:     results.StatePendingApproval,
		Interrupt: &results.Interrupt{
			Type: results.InterruptApproval,
			Prompt: fmt.Sprintf("%s (used: %s). Approve to go on, with a new budget as the arguments (or the same budget again from here); deny to stop the turn.",
				summary, spent.String()),
		},
	}
	for !t.free(c.card.CallID) {
		t.budgetWaits++
		c.card.CallID = fmt.Sprintf("budget_%d", t.budgetWaits)
	}
	t.calls = append(t.calls, c)
	t.byID[c.card.CallID] = c
	return c
}

// again is the same budget granted once more on top of what was spent.
func (b Budget) again(s Spent) Budget {
	if b.Tokens > 0 {
		b.Tokens += s.Tokens
	}
	if b.Cost > 0 {
		b.Cost += s.Cost
	}
	if b.ModelCalls > 0 {
		b.ModelCalls += s.ModelCalls
	}
	if b.ToolCalls > 0 {
		b.ToolCalls += s.ToolCalls
	}
	if b.WallTime > 0 {
		b.WallTime += s.WallTime
	}
	return b
}

func budgetFrom(args json.RawMessage) Budget {
	var b Budget
	// validateBudgetAnswer read it already.
	_ = json.Unmarshal(args, &b)
	return b
}

// validateBudgetAnswer checks an approve's new budget: it must fit the
// schema and leave room to go on, or the turn would ask again at once.
func (t *turn) validateBudgetAnswer(c *call, args json.RawMessage) error {
	if err := budgetSchema.Validate(args); err != nil {
		return fmt.Errorf("the new budget does not fit {tokens, model_calls, tool_calls, wall_time}: %v", err)
	}
	var b Budget
	if err := json.Unmarshal(args, &b); err != nil {
		return fmt.Errorf("the new budget cannot be read: %v", err)
	}
	// Wall time as of the wait's start: a validator has no clock. Calls of
	// unknown cost do not count: approving goes on knowing about them.
	spent := t.spentAt(c.waitingSince)
	if c.sessionBudget {
		spent = t.sessionSpentAt(c.waitingSince)
	}
	spent.Unpriced = 0
	if reached := overBudget(b, spent); len(reached) > 0 {
		return fmt.Errorf("the new budget is used up already (%s); raise it above what the turn used", strings.Join(reached, ", "))
	}
	return nil
}

func (b Budget) String() string {
	var parts []string
	if b.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", b.Tokens))
	}
	if b.Cost > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f", b.Cost))
	}
	if b.ModelCalls > 0 {
		parts = append(parts, fmt.Sprintf("%d model calls", b.ModelCalls))
	}
	if b.ToolCalls > 0 {
		parts = append(parts, fmt.Sprintf("%d tool calls", b.ToolCalls))
	}
	if b.WallTime > 0 {
		parts = append(parts, formatDuration(time.Duration(b.WallTime))+" wall time")
	}
	if len(parts) == 0 {
		return "no limit"
	}
	return strings.Join(parts, ", ")
}

// BudgetState is a budgeted turn's limits and what it had used at its
// last model call.
type BudgetState struct {
	Limit Budget `json:"limit"`
	Spent Spent  `json:"spent"`
}

// SessionBudget is what a session hands each of its turns: the session's
// budget, what its earlier turns used (wall time aside), and when the
// session began, from which its wall time counts.
type SessionBudget struct {
	Limit     Budget    `json:"limit"`
	Spent     Spent     `json:"spent"`
	StartedAt time.Time `json:"started_at"`
}

// sessionSpentAt is what the session has used by now: its earlier turns
// and this one.
func (t *turn) sessionSpentAt(now time.Time) Spent {
	s := t.spentAt(now)
	e := t.session.Spent
	return Spent{
		Tokens:     e.Tokens + s.Tokens,
		Cost:       e.Cost + s.Cost,
		Unpriced:   e.Unpriced + s.Unpriced,
		ModelCalls: e.ModelCalls + s.ModelCalls,
		ToolCalls:  e.ToolCalls + s.ToolCalls,
		WallTime:   Duration(now.Sub(t.session.StartedAt)),
	}
}

// sessionBudgetState is Result.SessionBudget: the session's budget as
// people may have raised it during the turn, and what the session used
// through the turn's last budget check.
func (t *turn) sessionBudgetState(now time.Time) *BudgetState {
	if t.session == nil {
		return nil
	}
	return &BudgetState{Limit: t.session.Limit, Spent: t.sessionSpentAt(now)}
}

// stateSessionBudget is State.SessionBudget: as of the last budget check.
func (t *turn) stateSessionBudget() *BudgetState {
	if t.session == nil {
		return nil
	}
	return &BudgetState{Limit: t.session.Limit, Spent: t.lastSessionSpent}
}

func (t *turn) budgetState() *BudgetState {
	if t.budget.empty() {
		return nil
	}
	return &BudgetState{Limit: t.budget, Spent: t.lastSpent}
}

// unpricedUnasked counts the unpriced calls a cost budget must ask about.
func (t *turn) unpricedUnasked() int {
	if t.unpricedOK {
		return 0
	}
	return t.unpriced
}

// addCost adds a model call's cost; nil is a call of an unpriced model.
func (t *turn) addCost(usd *float64) {
	if usd == nil {
		t.unpriced++
		return
	}
	t.cost += *usd
}

func (s Spent) String() string {
	return fmt.Sprintf("%d tokens, $%.4f, %d model calls, %d tool calls, %s", s.Tokens, s.Cost, s.ModelCalls, s.ToolCalls, formatDuration(time.Duration(s.WallTime).Round(time.Second)))
}
