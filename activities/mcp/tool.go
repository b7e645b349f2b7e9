package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.temporal.io/sdk/activity"

	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// Bounds on what a server may declare about a tool.
const (
	maxDescriptionBytes = 4 << 10
	maxSchemaBytes      = 64 << 10
)

// mcpToolName is what Tollgate can put after "<server>.".
var mcpToolName = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// adapt turns the listed tools into Tollgate tools; tap says which the
// server runs only as tasks. When strict (at start), an override naming a
// tool the server does not list is an error: the operator meant to
// restrict something, and a typo must not leave it unrestricted.
func (s *server) adapt(listed []*mcpsdk.Tool, tap *taskTap, strict bool) ([]tool.Tool, []Skipped, error) {
	byName := map[string]*mcpsdk.Tool{}
	for _, t := range listed {
		if t != nil {
			byName[t.Name] = t
		}
	}
	for _, name := range sortedKeys(s.cfg.Tools) {
		if _, ok := byName[name]; !ok && name != "*" && strict {
			return nil, nil, fmt.Errorf("mcp server %s: the configuration overrides tool %q, which the server does not list (it lists %d tools)", s.name, name, len(byName))
		}
	}
	var tools []tool.Tool
	var skipped []Skipped
	for _, name := range sortedKeys(byName) {
		t, err := s.adaptOne(byName[name], tap)
		if err != nil {
			skipped = append(skipped, Skipped{Server: s.name, Tool: clean(name, 128), Reason: err.Error()})
			continue
		}
		if t != nil {
			tools = append(tools, t)
		}
	}
	return tools, skipped, nil
}

// override merges the tool's own entry over the "*" entry. A tool with
// an entry of its own is offered unless that entry disables it, so "*"
// disabled plus entries is an allowlist.
func (s *server) override(name string) Override {
	star, own := s.cfg.Tools["*"], s.cfg.Tools[name]
	_, hasOwn := s.cfg.Tools[name]
	o := star
	if own.Approval != "" {
		o.Approval = own.Approval
	}
	if own.Idempotent != nil {
		o.Idempotent = own.Idempotent
	}
	o.Disabled = own.Disabled || (star.Disabled && !hasOwn)
	return o
}

func (s *server) adaptOne(t *mcpsdk.Tool, tap *taskTap) (tool.Tool, error) {
	o := s.override(t.Name)
	if o.Disabled {
		return nil, errors.New("disabled by the configuration")
	}
	task := tap.requiresTasks(t.Name)
	switch {
	case task && s.cfg.Command != "":
		return nil, errors.New(`the server runs it only as a task (execution.taskSupport "required"), and Tollgate makes task-augmented calls only to HTTP servers`)
	case task && !tap.tasksForCalls():
		return nil, errors.New(`the server runs it only as a task (execution.taskSupport "required") but does not declare task-augmented tools/call (capabilities.tasks.requests.tools.call)`)
	}
	if !mcpToolName.MatchString(t.Name) {
		return nil, errors.New("its name has characters a Tollgate tool name cannot have (letters, digits, '_', '-' and inner '.')")
	}
	schema := json.RawMessage(`{"type":"object"}`)
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("its input schema does not encode: %w", err)
		}
		schema = b
	}
	if len(schema) > maxSchemaBytes {
		return nil, fmt.Errorf("its input schema is %d bytes; at most %d are taken", len(schema), maxSchemaBytes)
	}
	var root struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(schema, &root); err != nil || root.Type != "object" {
		return nil, errors.New(`its input schema is not of type "object"`)
	}
	desc := clean(t.Description, maxDescriptionBytes)
	if desc == "" {
		title := t.Title
		if title == "" && t.Annotations != nil {
			title = t.Annotations.Title
		}
		desc = fmt.Sprintf("The %s tool of the MCP server %s.", clean(firstOf(title, t.Name), maxTitleBytes), s.name)
	}
	p := PolicyFor(t.Annotations, o)
	spec := tool.Spec{
		Name:        s.name + "." + t.Name,
		Description: desc,
		Schema:      schema,
		Approval:    p.Approval,
		Idempotent:  p.Idempotent,
		Concurrent:  p.Concurrent,
		Timeout:     s.cfg.timeout(),
	}.WithDefaults()
	// Validate compiles the schema: one that does not compile could not
	// check a call's arguments, so the tool is not offered.
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &mcpTool{srv: s, mcpName: t.Name, spec: spec, task: task}, nil
}

// mcpTool is one MCP tool as a Tollgate tool.
type mcpTool struct {
	srv     *server
	mcpName string
	spec    tool.Spec
	// task: the server runs the tool only as a task (see taskcall.go).
	task bool
}

func (t *mcpTool) Spec() tool.Spec { return t.spec }

// Run issues the call in a session of its own. See the package
// documentation for how elicitation and authorization map onto the
// turn's waits.
func (t *mcpTool) Run(ctx context.Context, call tool.Call) (results.Outcome, error) {
	return t.run(ctx, call, runOf(ctx, call))
}

// run is Run for the activity run r (zero outside an activity).
func (t *mcpTool) run(ctx context.Context, call tool.Call, r activityRun) (results.Outcome, error) {
	s := t.srv
	key := callKey{Execution: r.execution, Turn: call.TurnID, Call: call.CallID}
	run := r.String()
	st, found, err := s.states.load(ctx, key)
	if err != nil {
		return results.Outcome{}, fmt.Errorf("%s: %w", t.spec.Name, err)
	}
	if !found {
		st = callState{Version: stateVersion, callKey: key, Tool: t.spec.Name}
	}
	if t.task {
		return t.runTask(ctx, call, st, run)
	}
	var resumed *storedAnswer
	if r := call.Resume; r != nil {
		switch r.Decision {
		case results.DecisionAnswer:
			switch {
			case run != "" && st.SavedBy == run:
				// An earlier attempt of this run took the answer in and
				// saved what followed; the answers hold it already.
			case st.Pending == nil:
				return results.FailTool("Tollgate has no record of the question this answer is for (the worker that asked keeps it in a state directory this worker does not see, or it was removed), so it cannot be passed to %s; the call did not finish", s.name), nil
			default:
				a, err := st.Pending.answer(r.Answer)
				if err != nil {
					return results.FailTool("the answer cannot be passed to %s: %v", s.name, err), nil
				}
				resumed = &a
			}
		case results.DecisionConnected:
		default:
			return results.FailTool("a call of %s cannot go on after a %q decision", t.spec.Name, r.Decision), nil
		}
	}

	if resumed != nil && st.Round == nil {
		// The call that asked may still be open on this worker, waiting
		// for this very answer: it goes on where it stopped.
		if h := s.takeHeld(key, resumed.Question); h != nil {
			h.follow(ctx)
			h.el.deliver(*resumed)
			return t.await(ctx, h, call, st, resumed, run)
		}
	}
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	params := &mcpsdk.CallToolParams{Name: t.mcpName, Arguments: args}
	if rd := st.Round; rd != nil {
		// A multi-round-trip call: the answer is for one of the round's
		// input requests; the call is issued again only once each has one.
		if rd.Answers == nil {
			rd.Answers = map[string]storedAnswer{}
		}
		if resumed != nil {
			rd.Answers[rd.Current] = *resumed
			resumed = nil
		}
		if id, ok := rd.next(); ok {
			if run != "" && st.SavedBy == run && rd.Current == id && st.Pending != nil {
				// A retried attempt of the run that parked on this
				// question: the same wait again.
				in := st.Pending.Interrupt
				return results.Outcome{Kind: results.KindInterrupt, Interrupt: &in}, nil
			}
			return t.parkRound(ctx, st, id, run)
		}
		params.RequestState = rd.State
		params.InputResponses = mcpsdk.InputResponseMap{}
		for id, a := range rd.Answers {
			params.InputResponses[id] = a.result()
		}
		// The saved answers stay until the re-issue has a result: a
		// retried attempt issues the same round again.
		st.SavedBy, st.Pending = run, nil
		if err := s.states.save(ctx, st); err != nil {
			return results.Outcome{}, fmt.Errorf("%s: %w", t.spec.Name, err)
		}
	}

	// The call runs on a context of its own: when the server asks a
	// question with a request, the call is held open on this worker for
	// a while (see held), past the end of this run.
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	el := newElicitor(s.name, st.Answers, resumed, cancel)
	// The token names the call; progress for it becomes heartbeat
	// details.
	progress := newProgressSink(ctx, stateKey(key)[:32])
	params.SetProgressToken(progress.token)
	h := &heldCall{key: key, el: el, progress: progress, cancel: cancel, done: make(chan callDone, 1)}
	h.follow(ctx)
	go func() {
		defer cancel()
		sess, err := s.connect(callCtx, sessionOptions{user: call.User, elicit: el.handle, progress: progress})
		var res *mcpsdk.CallToolResult
		if err == nil {
			res, err = sess.cs.CallTool(callCtx, params)
		}
		sess.close(callCtx)
		if sess != nil && sess.proc != nil {
			if tail := sess.proc.Stderr(); tail != "" {
				s.opts.Logger.Debug("MCP server stderr", "mcp_server", s.name, "tool", t.spec.Name, "stderr", tail)
			}
		}
		h.ended.Store(true)
		h.done <- callDone{res: res, err: err, sess: sess}
	}()
	return t.await(ctx, h, call, st, resumed, run)
}

// await waits for the call to finish or to ask the person something.
func (t *mcpTool) await(ctx context.Context, h *heldCall, call tool.Call, st callState, resumed *storedAnswer, run string) (results.Outcome, error) {
	s := t.srv
	select {
	case q := <-h.el.asked:
		if ctx.Err() != nil {
			h.release()
			return results.Outcome{}, fmt.Errorf("%s: %w", t.spec.Name, ctx.Err())
		}
		_, _, resumedUsed := h.el.outcome()
		out, err := t.park(ctx, st, resumed, resumedUsed, q, run)
		if err != nil || out.Kind != results.KindInterrupt {
			h.release()
			return out, err
		}
		s.hold(h, q.ID)
		return out, nil
	case d := <-h.done:
		h.unfollow()
		return t.finish(ctx, call, st, resumed, run, h.el, d)
	}
}

// finish maps a call that ended onto its outcome.
func (t *mcpTool) finish(ctx context.Context, call tool.Call, st callState, resumed *storedAnswer, run string, el *elicitor, d callDone) (results.Outcome, error) {
	s := t.srv
	res, err, sess := d.res, d.err, d.sess
	parked, refused, resumedUsed := el.outcome()
	if refused != nil {
		_ = s.states.remove(ctx, st.callKey)
		return results.FailTool("%s asked the user for input in a way Tollgate cannot relay (%v); the call did not finish", s.name, refused), nil
	}
	if parked != nil {
		return t.park(ctx, st, resumed, resumedUsed, parked, run)
	}
	if ctx.Err() != nil {
		return results.Outcome{}, fmt.Errorf("%s: %w", t.spec.Name, ctx.Err())
	}
	if err != nil {
		if c, sent := sess.challenged(); c != nil {
			return t.needConnection(ctx, call, st, resumed, run, c, sent)
		}
		if sess != nil && sess.over.Load() {
			err = fmt.Errorf("%w: %w", errTooLarge, err)
		}
		return t.failed(err)
	}
	if resumed != nil && !resumedUsed {
		s.opts.Logger.Warn("MCP server finished a re-issued call without asking the question it had been answered", "mcp_server", s.name, "tool", t.spec.Name)
	}
	if res != nil && res.NeedsInput() {
		return t.inputRequired(ctx, st, res, run)
	}
	if err := s.states.remove(ctx, st.callKey); err != nil {
		s.opts.Logger.Warn("Could not remove an MCP call's record", "mcp_server", s.name, "error", err)
	}
	return toOutcome(s.name, res)
}

// park saves what the call has been answered so far and the new question,
// and ends the run with the interrupt.
func (t *mcpTool) park(ctx context.Context, st callState, resumed *storedAnswer, resumedUsed bool, q *question, run string) (results.Outcome, error) {
	s := t.srv
	if st.Round != nil {
		_ = s.states.remove(ctx, st.callKey)
		return results.FailTool("%s asked the user with an elicitation request while Tollgate was answering its input_required result; the call did not finish", s.name), nil
	}
	if resumed != nil && !resumedUsed {
		_ = s.states.remove(ctx, st.callKey)
		return results.FailTool("%s asked something other than the question the user answered when Tollgate issued the call again (its questions are not the same for the same call), so the answer could not be given; the call did not finish", s.name), nil
	}
	if st.Asked >= maxElicitations {
		_ = s.states.remove(ctx, st.callKey)
		return results.FailTool("%s asked the user more than %d questions in one call; the call did not finish", s.name, maxElicitations), nil
	}
	if resumed != nil {
		st.Answers = append(st.Answers, *resumed)
	}
	st.Pending = q
	st.Asked++
	st.SavedBy = run
	st.Updated = time.Now().UTC()
	if err := s.states.save(ctx, st); err != nil {
		return results.Outcome{}, fmt.Errorf("%s: %w", t.spec.Name, err)
	}
	in := q.Interrupt
	return results.Outcome{Kind: results.KindInterrupt, Interrupt: &in}, nil
}

// inputRequired parks a call whose result asks for input (a multi
// round-trip request): each input request becomes a question, put to the
// person one at a time; the request state is kept to be echoed.
func (t *mcpTool) inputRequired(ctx context.Context, st callState, res *mcpsdk.CallToolResult, run string) (results.Outcome, error) {
	s := t.srv
	if len(res.InputRequests) == 0 {
		// The server sheds load: a retry later may find it free.
		return results.Outcome{}, tool.Retryable(fmt.Errorf("%s: the server is busy (an input_required result without input requests)", t.spec.Name))
	}
	if st.Asked+len(res.InputRequests) > maxElicitations {
		_ = s.states.remove(ctx, st.callKey)
		return results.FailTool("%s asked the user more than %d questions in one call; the call did not finish", s.name, maxElicitations), nil
	}
	if len(res.RequestState) > maxRequestState {
		_ = s.states.remove(ctx, st.callKey)
		return results.FailTool("%s sent a request state of %d bytes; at most %d are kept; the call did not finish", s.name, len(res.RequestState), maxRequestState), nil
	}
	rd := &round{State: res.RequestState, Questions: map[string]*question{}, Answers: map[string]storedAnswer{}}
	for id, ir := range res.InputRequests {
		p, ok := ir.(*mcpsdk.ElicitParams)
		if !ok {
			_ = s.states.remove(ctx, st.callKey)
			return results.FailTool("%s asked for input Tollgate does not give (%T: sampling and roots are not offered); the call did not finish", s.name, ir), nil
		}
		if len(id) > 256 || !utf8.ValidString(id) {
			_ = s.states.remove(ctx, st.callKey)
			return results.FailTool("%s named an input request with an id longer than 256 bytes or not UTF-8; the call did not finish", s.name), nil
		}
		q, err := describe(s.name, p)
		if err != nil {
			_ = s.states.remove(ctx, st.callKey)
			return results.FailTool("%s asked the user for input in a way Tollgate cannot relay (%v); the call did not finish", s.name, err), nil
		}
		rd.Order = append(rd.Order, id)
		rd.Questions[id] = q
	}
	// Requests come as a map; the person is asked in a fixed order.
	slices.Sort(rd.Order)
	st.Round = rd
	st.Answers = nil
	return t.parkRound(ctx, st, rd.Order[0], run)
}

// parkRound puts the round's input request id to the person.
func (t *mcpTool) parkRound(ctx context.Context, st callState, id, run string) (results.Outcome, error) {
	q := st.Round.Questions[id]
	st.Round.Current = id
	st.Pending = q
	st.Asked++
	st.SavedBy = run
	st.Updated = time.Now().UTC()
	if err := t.srv.states.save(ctx, st); err != nil {
		return results.Outcome{}, fmt.Errorf("%s: %w", t.spec.Name, err)
	}
	in := q.Interrupt
	return results.Outcome{Kind: results.KindInterrupt, Interrupt: &in}, nil
}

// maxRequestState bounds the opaque state a server asks to be echoed.
const maxRequestState = 64 << 10

// needConnection answers a server's 401: the call waits for the user to
// connect the provider named like the server.
func (t *mcpTool) needConnection(ctx context.Context, call tool.Call, st callState, resumed *storedAnswer, run string, c *challenge, sent bool) (results.Outcome, error) {
	s := t.srv
	if s.usesServiceToken() {
		// The worker's own token was refused: a fresh one may pass.
		s.forgetServiceToken()
		return results.Outcome{}, tool.Retryable(fmt.Errorf("%s: the server refused the worker's own token (HTTP %d)", t.spec.Name, c.status))
	}
	if c.status == 403 && !c.insufficient {
		return results.FailTool("%s refused the call (HTTP 403): the user's account may not do this", s.name), nil
	}
	if call.User == "" {
		return results.FailTool("%s needs an account connection (HTTP %d), and this turn names no user to connect one for; start the turn with a user", s.name, c.status), nil
	}
	if sent && call.Resume != nil && call.Resume.Decision == results.DecisionConnected {
		// Asking again would go round in circles; the model can tell the
		// user.
		return results.FailTool("%s rejected the %s connection the user just made (HTTP %d); ask them to check the account and connect again", s.name, s.name, c.status), nil
	}
	if resumed != nil {
		// The answer was taken; it waits with the others for the re-run.
		st.Answers = append(st.Answers, *resumed)
		st.Pending, st.SavedBy, st.Updated = nil, run, time.Now().UTC()
		if err := s.states.save(ctx, st); err != nil {
			return results.Outcome{}, fmt.Errorf("%s: %w", t.spec.Name, err)
		}
	}
	scopes := c.scopes
	if s.opts.OAuth != nil {
		reg, err := s.discoverAuth(ctx, c)
		switch {
		case errors.Is(err, oauth.ErrResourceMismatch):
			return results.FailTool("%s pointed Tollgate at authorization for another resource than itself, so no account was connected for it; the call did not run", s.name), nil
		case err != nil:
			// A provider the operator configured under the server's name
			// may still connect the account.
			s.opts.Logger.Warn("MCP authorization discovery failed", "mcp_server", s.name, "error", err)
		default:
			scopes = reg.Scopes
		}
	}
	hint := clean(s.cfg.ConnectHint, 1024)
	if hint == "" {
		hint = fmt.Sprintf("Connect your %s account for the MCP server %s", s.name, redactURL(s.cfg.URL))
		if c.resourceMetadata != "" {
			hint += "; its authorization metadata: " + c.resourceMetadata
		}
		if sent {
			hint += " (the stored connection was rejected; connect again)"
		}
		hint += "."
	}
	return results.NeedConnection(s.name, hint, scopes...), nil
}

// failed classifies a session or protocol failure. The error becomes an
// internal error whose detail operators see and the model never does; a
// failure of the connection is retryable (for an idempotent tool), the
// server's own protocol error is not.
func (t *mcpTool) failed(err error) (results.Outcome, error) {
	s := t.srv
	err = s.redact(err)
	var rpcErr *jsonrpc.Error
	var start *startError
	switch {
	case errors.Is(err, errTooLarge):
		return results.FailTool("the result of %s was larger than %d bytes, the limit for this server; ask for less", t.spec.Name, s.cfg.maxResultBytes()), nil
	case errors.As(err, &start):
		return results.Outcome{}, fmt.Errorf("%s: %w", t.spec.Name, err)
	case errors.As(err, &rpcErr):
		return results.Outcome{}, fmt.Errorf("%s: the server answered with a protocol error: %w", t.spec.Name, err)
	default:
		return results.Outcome{}, tool.Retryable(fmt.Errorf("%s: the session with the server failed: %w", t.spec.Name, err))
	}
}

// startError is a stdio server that could not be started: retrying will
// not help.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// activityRun is the activity run a call executes in: its workflow
// execution's run id, which binds the call's record to that execution
// (see callKey), and its activity id, so that a retried attempt of the
// same run recognizes what it saved itself.
type activityRun struct {
	execution, activity string
}

func (r activityRun) String() string {
	if r == (activityRun{}) {
		return ""
	}
	return r.execution + "/" + r.activity
}

// runOf is the activity run of ctx; outside an activity (a test calling
// Run) there is none. The execution is the turn's chain (RunTool sets
// call.Execution), so a call parked across a continue-as-new finds the
// record its earlier runs saved.
func runOf(ctx context.Context, call tool.Call) activityRun {
	if !activity.IsActivity(ctx) {
		return activityRun{}
	}
	return activityRun{execution: call.Execution, activity: activity.GetInfo(ctx).ActivityID}
}
