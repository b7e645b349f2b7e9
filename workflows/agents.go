package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// agentsVersion of the turn's change marker runs named agents: a turn
// input's agent is resolved into the input at start, agent:<name> tools
// run the other agent as a child turn whose waits surface on the calling
// card, and a named agent's transfer must name one of its handoffs.
// Version 9 is compaction, added beside this; the numbers were assigned
// so that the two merge without a clash.
const agentsVersion = modelQueuesVersion + 2

// AgentToolPrefix in a turn's tools offers another agent as a tool:
// "agent:researcher".
const AgentToolPrefix = "agent:"

// MaxAgentDepth bounds how deep agents call each other: a model that
// keeps delegating would otherwise start turns without end.
const MaxAgentDepth = 8

// ChildWaitsName is the Signal an agent's turn sends the turn that called
// it whenever the calls waiting in it change.
const ChildWaitsName = "agent_waits"

// Agent is a named agent: instructions, a model, tools, a policy, and the
// agents it may hand the conversation to. Agents are defined on the
// worker (tollgate.Options.Agents, the worker's --agents file); a turn or
// session names one with Input.Agent.
type Agent struct {
	Name string `json:"name"`
	// Description says what the agent does, for the models that may call
	// it as a tool or hand off to it.
	Description string `json:"description,omitempty"`
	// Instructions are the agent's system prompt.
	Instructions string   `json:"instructions,omitempty"`
	Model        string   `json:"model"`
	Tools        []string `json:"tools,omitempty"`
	Policy       Policy   `json:"policy,omitempty"`
	MaxSteps     int      `json:"max_steps,omitempty"`
	// Handoffs are the agents this one may transfer the conversation to.
	Handoffs []string `json:"handoffs,omitempty"`
}

// Resolved is what a turn's agents resolved to when it started, kept in
// its input so that every later run and every replay runs the same agent
// even if the worker's agents change. Callers leave it empty.
type Resolved struct {
	// Agent is the named agent the turn runs; empty for a turn without one.
	Agent string `json:"agent,omitempty"`
	// Callable describes the agents the turn's agent:<name> tools call.
	Callable map[string]string `json:"callable,omitempty"`
	// Handoffs are the agents a named agent may transfer to.
	Handoffs []string `json:"handoffs,omitempty"`
}

// Caller is set on the turn of an agent that another turn called as a
// tool: which call of the calling turn it answers, and the chain of agents
// down to it.
type Caller struct {
	Call  string   `json:"call"`
	Chain []string `json:"chain,omitempty"`
	// Budget is what the calling turn had left of its budget (and its
	// session's) when it called, and OnBudget its policy's on_budget: the
	// called agent's turn spends no more than that, whatever its own
	// budget says.
	Budget   *Budget  `json:"budget,omitempty"`
	OnBudget OnBudget `json:"on_budget,omitempty"`
}

// ChildWaits is the payload of the ChildWaitsName Signal.
type ChildWaits struct {
	// Call is the calling turn's call the child answers.
	Call string `json:"call"`
	// Waiting are the child's waiting cards, nested ones included, with
	// call ids relative to the child.
	Waiting []results.Card `json:"waiting,omitempty"`
}

// validAgentName reports whether name may name an agent: it becomes part
// of a tool name, which model APIs limit to letters, digits, _ and -.
func validAgentName(name string) bool {
	if name == "" || len(name) > 48 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// ValidateAgents checks a set of agents on their own: names, models, and
// that every agent:<name> tool and handoff names an agent of the set.
// Errors name the agent and the field. tools says whether a plain tool
// name is offered; nil skips that check.
func ValidateAgents(agents []Agent, tools func(string) bool) error {
	names := map[string]bool{}
	for i, a := range agents {
		if !validAgentName(a.Name) {
			return fmt.Errorf("agents[%d]: name %q must be 1 to 48 letters, digits, _ or -", i, a.Name)
		}
		if names[a.Name] {
			return fmt.Errorf("agents[%d]: agent %q is defined twice", i, a.Name)
		}
		names[a.Name] = true
	}
	for _, a := range agents {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("agent %q: %s", a.Name, fmt.Sprintf(format, args...))
		}
		if a.Model == "" {
			return bad("model is empty; name one such as scripted:demo or openai:gpt-4.1")
		}
		if a.MaxSteps < 0 {
			return bad("max_steps is %d; it must be positive", a.MaxSteps)
		}
		seen := map[string]bool{}
		for i, name := range a.Tools {
			if seen[name] {
				return bad("tools[%d] %q is listed twice", i, name)
			}
			seen[name] = true
			if target, ok := strings.CutPrefix(name, AgentToolPrefix); ok {
				if !names[target] {
					return bad("tools[%d] %q names no agent", i, name)
				}
				if target == a.Name {
					return bad("tools[%d] %q calls the agent itself", i, name)
				}
				continue
			}
			if tools != nil && !tools(name) {
				return bad("tools[%d] %q is not a tool this worker offers", i, name)
			}
		}
		for i, h := range a.Handoffs {
			if !names[h] {
				return bad("handoffs[%d] %q names no agent", i, h)
			}
		}
		if err := validateInput(Input{Prompt: "-", Model: a.Model, Policy: a.Policy}); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// agentTool is the tool name the model sees for agent:<name>: model APIs
// allow no colon in tool names.
func agentTool(name string) string { return "agent_" + name }

// transferTool is the tool name the model sees for a handoff to name.
func transferTool(name string) string { return "transfer_to_" + name }

// usesAgents reports whether a turn needs the worker's agents resolved.
func usesAgents(in Input) bool {
	if in.Agent != "" {
		return true
	}
	return slices.ContainsFunc(in.Tools, func(s string) bool { return strings.HasPrefix(s, AgentToolPrefix) })
}

// resolveAgents records the named agent and the agents the turn calls, and
// returns the input as the agent makes it.
func (f Features) resolveAgents(ctx workflow.Context, in Input) (Input, error) {
	var found []Agent
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		var out []Agent
		if a, ok := f.Agents[in.Agent]; ok && in.Agent != "" {
			out = append(out, a)
			for _, name := range a.Tools {
				if target, ok := strings.CutPrefix(name, AgentToolPrefix); ok {
					if c, ok := f.Agents[target]; ok {
						out = append(out, c)
					}
				}
			}
		}
		for _, name := range in.Tools {
			if target, ok := strings.CutPrefix(name, AgentToolPrefix); ok {
				if c, ok := f.Agents[target]; ok {
					out = append(out, c)
				}
			}
		}
		return out
	}).Get(&found)
	if err != nil {
		return in, fmt.Errorf("read the recorded agents: %w", err)
	}
	return mergeAgent(in, found)
}

// mergeAgent applies the named agent (found[0] when in.Agent is set) to
// in. The input's own fields narrow what the agent allows: a model of its
// own, instructions added after the agent's, a subset of the agent's
// tools, approvals raised, and policy limits the agent leaves unset.
func mergeAgent(in Input, found []Agent) (Input, error) {
	byName := map[string]Agent{}
	for _, a := range found {
		byName[a.Name] = a
	}
	r := &Resolved{}
	if in.Agent != "" {
		a, ok := byName[in.Agent]
		if !ok {
			return in, fmt.Errorf("agent %q is not an agent this worker offers", in.Agent)
		}
		r.Agent, r.Handoffs = a.Name, slices.Clone(a.Handoffs)
		if in.Model == "" {
			in.Model = a.Model
		}
		switch {
		case in.System == "":
			in.System = a.Instructions
		case a.Instructions != "":
			in.System = a.Instructions + "\n\n" + in.System
		}
		if in.Tools == nil {
			in.Tools = slices.Clone(a.Tools)
		} else {
			for i, name := range in.Tools {
				if !slices.Contains(a.Tools, name) {
					return in, fmt.Errorf("tools[%d] %q is not a tool of agent %q, whose tools are: %s", i, name, a.Name, strings.Join(a.Tools, ", "))
				}
			}
		}
		in.Policy = narrowPolicy(a.Policy, in.Policy)
		if a.MaxSteps > 0 && (in.MaxSteps == 0 || in.MaxSteps > a.MaxSteps) {
			in.MaxSteps = a.MaxSteps
		}
	}
	for _, name := range in.Tools {
		target, ok := strings.CutPrefix(name, AgentToolPrefix)
		if !ok {
			continue
		}
		c, ok := byName[target]
		if !ok {
			return in, fmt.Errorf("tool %q names no agent this worker offers", name)
		}
		if r.Callable == nil {
			r.Callable = map[string]string{}
		}
		r.Callable[target] = c.Description
	}
	in.Resolved = r
	return in, nil
}

// narrowPolicy is the agent's policy with what the input may add: an
// approval the agent does not require, and limits the agent leaves unset.
func narrowPolicy(agent, in Policy) Policy {
	out := agent
	if len(in.Approval) > 0 {
		out.Approval = map[string]string{}
		//workflowcheck:ignore each key is set on its own; order does not matter
		for k, v := range agent.Approval {
			out.Approval[k] = v
		}
		//workflowcheck:ignore each key is set on its own; order does not matter
		for k, v := range in.Approval {
			if out.Approval[k] != string(tool.ApprovalAlways) {
				out.Approval[k] = v
			}
		}
	}
	if out.ResponseTimeout == 0 {
		out.ResponseTimeout = in.ResponseTimeout
	}
	if out.OnTimeout == "" {
		out.OnTimeout = in.OnTimeout
	}
	if out.MaxCallsPerStep == 0 {
		out.MaxCallsPerStep = in.MaxCallsPerStep
	}
	if out.MaxHistoryEvents == 0 {
		out.MaxHistoryEvents = in.MaxHistoryEvents
	}
	if out.MaxHistoryBytes == 0 {
		out.MaxHistoryBytes = in.MaxHistoryBytes
	}
	if out.WorkspaceTimeout == 0 {
		out.WorkspaceTimeout = in.WorkspaceTimeout
	}
	if out.Budget == (Budget{}) {
		out.Budget = in.Budget
	}
	if out.OnBudget == "" {
		out.OnBudget = in.OnBudget
	}
	return out
}

// taskSchema is the one argument of an agent offered as a tool.
const taskSchema = `{"type":"object","properties":{"task":{"type":"string","description":"What the agent should do, with everything it needs to know."}},"required":["task"],"additionalProperties":false}`

// transferSchema is the argument of a handoff tool.
const transferSchema = `{"type":"object","properties":{"message":{"type":"string","description":"A short note for the agent taking over."},"now":{"type":"boolean","description":"true: the agent takes over at once and answers this message; false or omitted: from the next message on."}},"additionalProperties":false}`

// describeAgents adds the specs of the turn's agent tools and handoffs,
// which run in the workflow rather than on a worker.
func (t *turn) describeAgents() error {
	r := t.in.Resolved
	if r == nil {
		return nil
	}
	for _, name := range t.in.Tools {
		target, ok := strings.CutPrefix(name, AgentToolPrefix)
		if !ok {
			continue
		}
		desc := r.Callable[target]
		if desc == "" {
			desc = "Ask the agent " + target + " to do a task; it answers with its result."
		}
		spec := tool.Spec{Name: agentTool(target), Description: desc, Schema: json.RawMessage(taskSchema), Idempotent: true, Concurrent: true}
		if _, dup := t.specs[spec.Name]; !dup {
			if err := t.addSpec(spec); err != nil {
				return err
			}
		}
	}
	for _, target := range r.Handoffs {
		spec := tool.Spec{Name: transferTool(target), Description: "Hand the conversation to the agent " + target + ".", Schema: json.RawMessage(transferSchema), Idempotent: true}
		if _, dup := t.specs[spec.Name]; !dup {
			if err := t.addSpec(spec); err != nil {
				return err
			}
		}
	}
	return nil
}

// indexAgents maps the tool names of the turn's agents and handoffs to
// the agent they name.
func (t *turn) indexAgents() {
	t.agentTools, t.handoffTools = map[string]string{}, map[string]string{}
	r := t.in.Resolved
	if r == nil {
		return
	}
	for _, name := range t.in.Tools {
		if target, ok := strings.CutPrefix(name, AgentToolPrefix); ok {
			t.agentTools[agentTool(target)] = target
		}
	}
	for _, target := range r.Handoffs {
		t.handoffTools[transferTool(target)] = target
	}
}

// chain names the agents from the top turn's down to this turn's.
func (t *turn) chain() []string {
	if t.in.Caller != nil {
		return slices.Clone(t.in.Caller.Chain)
	}
	if t.in.Resolved != nil && t.in.Resolved.Agent != "" {
		return []string{t.in.Resolved.Agent}
	}
	return nil
}

// callerOf names the turn and the call that ran this turn's agent as a
// tool; both empty for a turn nobody called.
func (t *turn) callerOf(ctx workflow.Context) (turnID, callID string) {
	p := workflow.GetInfo(ctx).ParentWorkflowExecution
	if t.in.Caller == nil || p == nil {
		return "", ""
	}
	return p.ID, t.in.Caller.Call
}

// ChildTurnID is the workflow id of the turn that runs call callID of
// turn turnID when the call runs another agent.
func ChildTurnID(turnID, callID string) string { return turnID + "/" + callID }

// RouteResponse finds the turn a response is for: a call id
// "<call>/<child call>", as the calling card's agent.waiting shows it, is
// call <child call> of the turn that runs <call>, however deep. Call ids
// never hold "/", so any other id is the turn's own.
func RouteResponse(turnID string, r Response) (string, Response) {
	for {
		call, rest, ok := strings.Cut(r.CallID, "/")
		if !ok || call == "" || rest == "" {
			return turnID, r
		}
		turnID, r.CallID = ChildTurnID(turnID, call), rest
	}
}

// runAgent runs call c's agent as a child turn and turns how it ended into
// the call's outcome.
func (t *turn) runAgent(ctx workflow.Context, c *call, name string) {
	var args struct {
		Task string `json:"task"`
	}
	if err := json.Unmarshal(c.card.EffectiveArguments(), &args); err != nil || strings.TrimSpace(args.Task) == "" {
		c.fail(results.FailureToolError, "the call needs a task: what the agent should do", "", "")
		return
	}
	id := ChildTurnID(t.id, c.card.CallID)
	chain := append(t.chain(), name)
	if slices.Contains(chain[:len(chain)-1], name) {
		// A loop of agents calling each other would never end.
		c.fail(results.FailureToolError, fmt.Sprintf("the agent %s is already working on this task further up (%s), so it cannot be called again from here; answer with what you have", name, strings.Join(chain[:len(chain)-1], " → ")), "", "")
		return
	}
	if len(chain) > MaxAgentDepth {
		c.fail(results.FailureToolError, fmt.Sprintf("agents call each other at most %d deep, so the agent %s was not called; answer with what you have", MaxAgentDepth, name), "", "")
		return
	}
	in := Input{
		Agent:  name,
		Prompt: args.Task,
		User:   t.in.User,
		Caller: &Caller{Call: c.card.CallID, Chain: chain},
		// The caller's labels hold in the agent's turn too, for the
		// approval rules that read them.
		Metadata: t.in.Metadata,
	}
	if t.v >= childBudgetVersion {
		left, reached, bounded := t.budgetLeft(workflow.Now(ctx))
		if len(reached) > 0 {
			c.fail(results.FailureToolError, fmt.Sprintf("the budget is spent (%s), so the agent %s was not called; answer with what you have", strings.Join(reached, ", "), name), "", "")
			return
		}
		if bounded {
			in.Caller.Budget, in.Caller.OnBudget = &left, t.in.Policy.OnBudget
		}
	}
	c.card.Agent = &results.AgentCall{Name: name, Turn: id, Chain: chain}
	opts := workflow.ChildWorkflowOptions{
		WorkflowID: id,
		// A call of the parent's is never left running on its own: the
		// child is asked to cancel and answer its calls when the parent
		// ends, and the parent waits for it when it is cancelled.
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation:   true,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	if t.ui {
		opts.StaticSummary = fmt.Sprintf("agent %s for %s", name, c.card.CallID)
	}
	if t.features.SearchAttributes && t.v >= childBudgetVersion {
		// Set at the start, so no list ever shows the child as a turn of
		// its own.
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(ParentAttr.ValueSet(clipBytes(t.id, maxKeywordAttrBytes)))
	}
	cctx := workflow.WithChildOptions(ctx, opts)
	var res Result
	err := workflow.ExecuteChildWorkflow(cctx, WorkflowName, in).Get(ctx, &res)
	c.card.Agent.Waiting = nil
	if err == nil {
		t.countChild(res)
	}
	switch {
	case ctx.Err() != nil:
		c.fail(results.FailureToolError, fmt.Sprintf("%s while the agent %s worked on this call; it was stopped", t.interruption(), name), "", "")
	case err != nil:
		var app *temporal.ApplicationError
		msg := fmt.Sprintf("the agent %s could not run", name)
		if errors.As(err, &app) && app.Type() == ErrTypeInvalidInput {
			// Our own sentence about the input, nothing internal.
			msg += ": " + app.Message()
		}
		workflow.GetLogger(ctx).Warn("Agent turn failed", "agent", name, "turn", id, "error", err)
		c.fail(results.FailureToolError, msg, "", "")
	case res.Status == StatusCompleted:
		c.clear()
		c.card.State = results.StateSucceeded
		c.card.Output = agentOutput(res)
		if t.v >= childBudgetVersion {
			if note := unknownOutcomes(name, res); note != "" {
				c.card.Output.Parts = append(c.card.Output.Parts, results.TextPart(note))
			}
		}
	default:
		c.fail(results.FailureToolError, agentFailure(name, res), "", "")
	}
}

// countChild adds what the child turn used to this turn's usage and
// budget.
func (t *turn) countChild(res Result) {
	t.usage.InputTokens += res.Usage.InputTokens
	t.usage.OutputTokens += res.Usage.OutputTokens
	t.usage.CachedTokens += res.Usage.CachedTokens
	t.cost += res.Cost
	t.unpriced += res.UnpricedCalls
	t.childSteps += res.Steps
	n := len(res.Cards)
	if res.Omitted != nil {
		n += res.Omitted.Total
	}
	t.toolCalls += n
}

// agentOutput is a finished agent's answer as the call's output: its text,
// and the sources and media of its calls.
func agentOutput(res Result) *results.Success {
	s := &results.Success{}
	if res.Text != "" {
		s.Parts = append(s.Parts, results.TextPart(res.Text))
	}
	for _, card := range res.Cards {
		if card.Output == nil {
			continue
		}
		s.Sources = append(s.Sources, card.Output.Sources...)
		for _, p := range card.Output.Parts {
			if p.Type == results.PartMedia {
				s.Parts = append(s.Parts, p)
			}
		}
	}
	return s
}

// unknownOutcomes names the child's calls that ended with their outcome
// unknown: the child's model was told, but its answer may not say so, and
// the caller must not take the work as done or do it again unawares.
func unknownOutcomes(name string, res Result) string {
	var lines []string
	for _, card := range res.Cards {
		if card.Failure != nil && card.Failure.Reason == results.FailureOutcomeUnknown {
			lines = append(lines, card.CallID+" ("+card.Tool+"): "+results.OutcomeUnknownMessage)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "Calls of the agent " + name + " whose outcome is unknown:\n" + strings.Join(lines, "\n")
}

// agentFailure says, for the model, why an agent's turn gave no answer.
func agentFailure(name string, res Result) string {
	switch res.Status {
	case StatusFailed:
		return fmt.Sprintf("the agent %s failed: %s", name, res.Error)
	case StatusMaxSteps:
		return fmt.Sprintf("the agent %s stopped after %d steps without an answer", name, res.Steps)
	case StatusCancelled:
		return fmt.Sprintf("the agent %s was cancelled before it answered", name)
	case StatusTransferred:
		return fmt.Sprintf("the agent %s handed the task to %s instead of answering", name, res.Transfer.Target)
	default:
		return fmt.Sprintf("the agent %s ended %s without an answer", name, res.Status)
	}
}

// runHandoff is a named agent's transfer_to_<name> call: the turn ends
// transferred to that agent, now or from the next turn on.
func (t *turn) runHandoff(c *call, target string) {
	var args struct {
		Message string `json:"message"`
		Now     bool   `json:"now"`
	}
	_ = json.Unmarshal(c.card.EffectiveArguments(), &args)
	tr := &results.Transfer{Target: target, Message: args.Message, Now: args.Now}
	c.clear()
	c.card.State = results.StateSucceeded
	c.card.Transfer = tr
	if t.transfer == nil {
		t.transfer = tr
	}
}

// refusedTransfer says why a named agent may not transfer to target;
// empty when it may. Turns without a named agent transfer anywhere, as before.
func (t *turn) refusedTransfer(target string) string {
	r := t.in.Resolved
	if t.v < agentsVersion || r == nil || r.Agent == "" {
		return ""
	}
	if slices.Contains(r.Handoffs, target) {
		return ""
	}
	if len(r.Handoffs) == 0 {
		return fmt.Sprintf("the agent %s hands off to no agent, so the transfer to %q did not happen; answer yourself", r.Agent, target)
	}
	return fmt.Sprintf("%q is not an agent %s may hand off to; it may hand off to: %s", target, r.Agent, strings.Join(r.Handoffs, ", "))
}

// waitingTree is every card waiting in this turn and the turns it calls,
// the nested ones with call ids relative to this turn.
func (t *turn) waitingTree() []results.Card {
	var out []results.Card
	for _, c := range t.calls {
		if c.card.State.Waiting() {
			out = append(out, c.card)
		}
		if a := c.card.Agent; a != nil && !c.card.State.Final() {
			out = append(out, a.Waiting...)
		}
	}
	return out
}

// tellCaller sends the turn that called this one its waiting cards when
// they changed since it last did. The calling turn keeps only the latest
// list, so its history grows with the waits, not with their age; a lost
// worker changes nothing, since the Signal is a command in history.
func (t *turn) tellCaller(ctx workflow.Context) {
	if t.v < agentsVersion || t.in.Caller == nil {
		return
	}
	parent := workflow.GetInfo(ctx).ParentWorkflowExecution
	if parent == nil {
		return
	}
	waiting := t.waitingTree()
	key := waitKey(waiting)
	if key == t.toldCaller {
		return
	}
	t.toldCaller = key
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	// The parent's latest run: one that continued as new still has the
	// call.
	f := workflow.SignalExternalWorkflow(dctx, parent.ID, "", ChildWaitsName, ChildWaits{Call: t.in.Caller.Call, Waiting: waiting})
	workflow.Go(dctx, func(gctx workflow.Context) {
		defer cancel()
		if err := f.Get(gctx, nil); err != nil {
			workflow.GetLogger(gctx).Warn("Could not tell the calling turn about waits", "parent", parent.ID, "error", err)
		}
	})
}

// waitKey tells one list of waiting cards from another.
func waitKey(cards []results.Card) string {
	var b strings.Builder
	for _, c := range cards {
		b.WriteString(c.CallID + ":" + string(c.State) + ":" + strconv.Itoa(len(c.Decisions)) + ";")
	}
	return b.String()
}

// childWaitsVersion of the turn's change marker receives child turns'
// waits only in a turn that can call an agent as a tool. Every other turn
// kept the receiving coroutine idle for its whole life, a goroutine and
// the SDK's state for it held as long as the turn was parked (bench row
// 3a).
const childWaitsVersion = toolsRefVersion + 1

// receivesChildWaits says whether the turn runs receiveChildWaits: only
// a turn that calls agents as tools starts child turns (a handoff ends the
// turn instead), and it knows from its input whether it can.
func (t *turn) receivesChildWaits() bool {
	if t.v < agentsVersion {
		return false
	}
	return t.v < childWaitsVersion || len(t.agentTools) > 0
}

// receiveChildWaits keeps each agent call's card showing what waits in
// the agent's turn.
func (t *turn) receiveChildWaits(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, ChildWaitsName)
	for {
		var w ChildWaits
		if !ch.Receive(ctx, &w) {
			return
		}
		c := t.find(w.Call)
		if c == nil || c.card.Agent == nil || c.card.State.Final() {
			// A late Signal from a child whose call has ended.
			continue
		}
		waiting := make([]results.Card, 0, len(w.Waiting))
		for _, card := range w.Waiting {
			card.CallID = c.card.CallID + "/" + card.CallID
			waiting = append(waiting, card)
		}
		c.card.Agent.Waiting = waiting
		t.waitsChanged(ctx)
	}
}

// ListAgentsName is a one-task workflow that returns the agents of the
// worker that runs it: the gateway and the starter learn what a task
// queue's workers offer by asking one of them.
const ListAgentsName = "ListAgents"

// AgentInfo is what a listing shows of an agent: never its instructions,
// which are the operator's prompt, not the caller's business.
type AgentInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Model       string   `json:"model"`
	Tools       []string `json:"tools"`
	Handoffs    []string `json:"handoffs,omitempty"`
}

// ListAgents is the ListAgentsName workflow. It completes in its first
// task, so it is never replayed against other agents than it read.
func (f Features) ListAgents(ctx workflow.Context) ([]AgentInfo, error) {
	names := make([]string, 0, len(f.Agents))
	//workflowcheck:ignore keys are sorted before use
	for name := range f.Agents {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]AgentInfo, 0, len(names))
	for _, name := range names {
		a := f.Agents[name]
		out = append(out, AgentInfo{Name: a.Name, Description: a.Description, Model: a.Model, Tools: append([]string{}, a.Tools...), Handoffs: a.Handoffs})
	}
	return out, nil
}

// Handoff is the input of the turn that continues a transferred turn
// with the agent its transfer names: that agent, and the conversation as
// the turn left it (its head and the messages after the last reply).
// Callers add the prompt, if any, and the user.
func Handoff(res Result) (Input, error) {
	if res.Transfer == nil {
		return Input{}, errors.New("the turn did not end with a transfer")
	}
	if !validAgentName(res.Transfer.Target) {
		return Input{}, fmt.Errorf("the transfer names %q, which is no agent's name", res.Transfer.Target)
	}
	if res.Head == "" {
		return Input{}, errors.New("the turn's conversation was not stored, so it cannot be continued by its head; start the agent with the whole conversation instead")
	}
	head, rest := continuation(Input{}, res)
	return Input{Agent: res.Transfer.Target, Head: head, Messages: rest, Workspace: res.Workspace}, nil
}

// forwardSignal sends a respond Signal for a call waiting in an agent this
// turn called ("<call>/<child call>") on to that agent's turn, for systems
// that can only signal the turn they know; the child validates it (and
// counts it as invalid if it does not fit). It reports whether the Signal
// was the child's.
func (t *turn) forwardSignal(ctx workflow.Context, r Response) bool {
	if t.v < agentsVersion || t.status.Final() {
		return false
	}
	child, routed := RouteResponse(t.id, r)
	if child == t.id {
		return false
	}
	call, _, _ := strings.Cut(r.CallID, "/")
	c := t.find(call)
	if c == nil || c.card.Agent == nil || c.card.State.Final() {
		return false
	}
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	f := workflow.SignalExternalWorkflow(dctx, child, "", RespondName, routed)
	workflow.Go(dctx, func(gctx workflow.Context) {
		defer cancel()
		if err := f.Get(gctx, nil); err != nil {
			workflow.GetLogger(gctx).Warn("Could not forward a respond signal to an agent's turn", "turn", child, "error", err)
		}
	})
	return true
}
