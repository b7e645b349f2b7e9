package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/compact"
	"github.com/tollgate-dev/tollgate/model/scripted"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
)

// scriptedWindow answers like a model with a small context window: a
// summary request gets a summary; a conversation of more than max
// messages is refused as too long; otherwise the next of replies, in
// order. Input tokens are 40 a message, so the provider's figures grow
// with the conversation.
func scriptedWindow(h *harness, max int, replies ...results.Message) {
	next := 0
	h.model.answer = func(req model.Request) (model.Response, error) {
		if req.System == compact.SummarySystem {
			return model.Response{Message: results.AssistantText("SUMMARY: echoed 1 and 2"), Usage: model.Usage{InputTokens: 100, OutputTokens: 50}}, nil
		}
		if max > 0 && len(req.Messages) > max {
			return model.Response{}, &model.Error{Message: "prompt is too long", ContextLength: true}
		}
		if next >= len(replies) {
			return model.Response{}, &model.Error{Message: fmt.Sprintf("script has %d replies", len(replies))}
		}
		next++
		return model.Response{Message: replies[next-1], Usage: model.Usage{InputTokens: 40 * len(req.Messages), OutputTokens: 5}}, nil
	}
}

func (h *harness) summaryRequests() int {
	h.model.mu.Lock()
	defer h.model.mu.Unlock()
	n := 0
	for _, r := range h.model.requests {
		if r.System == compact.SummarySystem {
			n++
		}
	}
	return n
}

// checkPaired fails unless every tool call in msgs is answered right
// after it and every tool message answers such a call.
func checkPaired(t *testing.T, msgs []results.Message) {
	t.Helper()
	open := map[string]bool{}
	for i, m := range msgs {
		switch m.Role {
		case results.RoleTool:
			require.True(t, open[m.ToolCallID], "message %d answers call %s, which is not open", i, m.ToolCallID)
			delete(open, m.ToolCallID)
		default:
			require.Empty(t, open, "message %d follows unanswered calls", i)
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		}
	}
	require.Empty(t, open)
}

// A provider that refuses the conversation as too long gets one
// compaction and the call again: the turn succeeds, the model reads the
// summary and the last exchange verbatim, and the whole conversation
// stays stored under the result's full head.
func TestContextLengthErrorCompactsAndRetries(t *testing.T) {
	h := newHarness(t)
	scriptedWindow(h, 6, oneEchoPerStep(3)...)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}})

	require.Equal(t, StatusCompleted, res.Status, res.Error)
	require.Equal(t, "done", res.Text)
	require.Equal(t, 1, res.Compactions)
	require.Equal(t, 1, h.summaryRequests())

	// The call after the compaction: summary, then the last step verbatim.
	last := h.model.last()
	require.Len(t, last, 3)
	require.Equal(t, results.RoleUser, last[0].Role)
	require.Equal(t, compact.SummaryPrefix+"SUMMARY: echoed 1 and 2", last[0].Text())
	require.Equal(t, "e3", last[1].ToolCalls[0].ID)
	require.Equal(t, "e3", last[2].ToolCallID)
	checkPaired(t, last)

	// The summary call counts: 4 calls answered (40 a message) plus it.
	require.Equal(t, 40*(1+3+5+3)+100, res.Usage.InputTokens)
	require.Equal(t, 4*5+50, res.Usage.OutputTokens)
	require.Positive(t, res.Cost)

	// People and the result keep everything; the model goes on from the
	// compacted conversation.
	require.Len(t, res.Messages, 8)
	whole, err := h.store.Load(res.FullHead)
	require.NoError(t, err)
	require.Equal(t, res.Messages, whole)
	compacted, err := h.store.Load(res.Head)
	require.NoError(t, err)
	require.Len(t, compacted, 4)
	require.Equal(t, "done", compacted[3].Text())
}

func TestCompactionOffFailsOnContextLength(t *testing.T) {
	h := newHarness(t)
	scriptedWindow(h, 4, oneEchoPerStep(3)...)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}, Policy: Policy{Compaction: compact.Off}})

	require.Equal(t, StatusFailed, res.Status)
	require.Equal(t, "the conversation is longer than the model's context window and policy.compaction is off", res.Error)
	require.Zero(t, res.Compactions)
	require.Zero(t, h.summaryRequests())
}

func TestStillTooLongAfterCompactionFails(t *testing.T) {
	h := newHarness(t)
	scriptedWindow(h, 2, oneEchoPerStep(3)...)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}})

	require.Equal(t, StatusFailed, res.Status)
	require.Equal(t, "the conversation is longer than the model's context window even right after it was compacted", res.Error)
	require.Equal(t, 1, res.Compactions)
}

// drop_oldest, triggered by the threshold: before a call that would pass
// 80% of policy.context_tokens the oldest exchanges are dropped whole,
// with no model call, and the model is told how many; the task stays.
func TestDropOldestCompactsBeforeTheWindowIsReached(t *testing.T) {
	h := newHarness(t)
	scriptedWindow(h, 0, oneEchoPerStep(4)...)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}, Policy: Policy{ContextTokens: 100, Compaction: compact.DropOldest}})

	require.Equal(t, StatusCompleted, res.Status, res.Error)
	require.GreaterOrEqual(t, res.Compactions, 1)
	require.Zero(t, h.summaryRequests())
	h.model.mu.Lock()
	defer h.model.mu.Unlock()
	for i, r := range h.model.requests {
		checkPaired(t, r.Messages)
		require.Equal(t, results.RoleUser, r.Messages[0].Role, "request %d opens with a user message", i)
		if i > 1 {
			// The task is never dropped: it opens the conversation, then
			// the note of what was dropped.
			require.Equal(t, "p", r.Messages[0].Text(), "request %d keeps the task", i)
			require.True(t, strings.HasSuffix(r.Messages[1].Text(), "were dropped to fit the model's context window.]"), "request %d: %q", i, r.Messages[1].Text())
			require.LessOrEqual(t, len(r.Messages), 6, "request %d holds the task, the note and at most two steps", i)
		}
	}
	whole, err := h.store.Load(res.FullHead)
	require.NoError(t, err)
	require.Equal(t, res.Messages, whole)
	// After the first two calls: the task, the note and the last step.
	require.Equal(t, 40*(1+3+4+4+4), res.Usage.InputTokens)
}

func TestCompactionPolicyIsValidated(t *testing.T) {
	require.ErrorContains(t, validateInput(Input{Prompt: "p", Model: "m:x", Policy: Policy{Compaction: "squash"}}), `policy.compaction is "squash"; it must be summarize, drop_oldest or off`)
	require.ErrorContains(t, validateInput(Input{Prompt: "p", Model: "m:x", Policy: Policy{ContextTokens: -1}}), "policy.context_tokens must not be negative")
	require.ErrorContains(t, ValidateInput(Input{Prompt: "p", Model: "m:x", SessionBudget: &SessionBudget{}}), "session_budget is what a session hands its turns")
	require.ErrorContains(t, validateInput(Input{Prompt: "p", Model: "m:x", SessionBudget: &SessionBudget{Limit: Budget{Tokens: -1}}}), "session_budget limits must not be negative")
}

// eventLog keeps the events a turn publishes.
type eventLog struct {
	mu     sync.Mutex
	events []stream.Event
}

func (l *eventLog) Publish(ev stream.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *eventLog) of(typ stream.Type) []stream.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []stream.Event
	for _, ev := range l.events {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// The live stream says each model call's usage and that the turn
// compacted, and the state query the turn's usage and compactions.
func TestCompactionAndUsageAreLiveEvents(t *testing.T) {
	events := &eventLog{}
	h := newHarnessWith(t, Features{Events: events})
	scriptedWindow(h, 6, oneEchoPerStep(3)...)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}})
	require.Equal(t, StatusCompleted, res.Status, res.Error)

	compactions := events.of(stream.TypeCompaction)
	require.Len(t, compactions, 1)
	require.Equal(t, 4, compactions[0].Step)
	require.Equal(t, &stream.Compaction{Strategy: "summarize", Reason: "context_length", Compacted: 5, Kept: 2, Compactions: 1}, compactions[0].Compaction)

	usage := events.of(stream.TypeUsage)
	require.Len(t, usage, 5, "four answered calls and the summary")
	var summaries int
	for _, ev := range usage {
		if ev.Usage.Compaction {
			summaries++
			require.Equal(t, 100, ev.Usage.InputTokens)
		}
		require.NotNil(t, ev.Usage.Cost, "fake:model has a price")
	}
	require.Equal(t, 1, summaries)
	last := usage[len(usage)-1].Usage
	require.Equal(t, res.Usage.InputTokens+res.Usage.OutputTokens, last.TurnTokens)
	require.InDelta(t, res.Cost, last.TurnCost, 1e-9)

	var live liveResult
	results := events.of(stream.TypeResult)
	require.Len(t, results, 1)
	require.NoError(t, json.Unmarshal(results[0].Result, &live))
	require.Equal(t, 1, live.Compactions)
	require.InDelta(t, res.Cost, live.Cost, 1e-9)

	// The state after the turn ended.
	s := h.state(t)
	require.Equal(t, 1, s.Compactions)
	require.Equal(t, res.Usage, *s.Usage)
	require.Equal(t, 4, s.LastModelCall.Step)
	require.False(t, s.LastModelCall.Compaction)
}

// A scripted model's window is the scripted default: a turn that nears
// it compacts without policy.context_tokens, as a turn with a model of a
// known family does. Another model of an unknown family does not.
func TestScriptedModelCompactsNearItsDefaultWindow(t *testing.T) {
	for _, c := range []struct {
		model string
		want  int
	}{{"scripted:long.json", 1}, {"fake:model", 0}} {
		t.Run(c.model, func(t *testing.T) {
			h := newHarness(t)
			// Each step's call and its echo take a tenth of the window: the
			// ninth call would pass 80% of it.
			text := strings.Repeat("x", scripted.DefaultContextTokens*4/20)
			var replies []results.Message
			for i := range 10 {
				replies = append(replies, calls("", tc(fmt.Sprintf("e%d", i), "echo", fmt.Sprintf(`{"text":%q}`, text))))
			}
			replies = append(replies, results.AssistantText("done"))
			next := 0
			h.model.answer = func(req model.Request) (model.Response, error) {
				if req.System == compact.SummarySystem {
					return model.Response{Message: results.AssistantText("SUMMARY"), Usage: model.Usage{InputTokens: 100, OutputTokens: 5}}, nil
				}
				next++
				reply := replies[next-1]
				return model.Response{Message: reply, Usage: model.Usage{InputTokens: compact.Estimate(req.Messages), OutputTokens: compact.Estimate([]results.Message{reply})}}, nil
			}
			res := h.run(t, Input{Prompt: "p", Model: c.model, Tools: []string{"echo"}})
			require.Equal(t, StatusCompleted, res.Status, res.Error)
			require.Equal(t, c.want, res.Compactions)
			require.Equal(t, c.want, h.summaryRequests())
		})
	}
}
