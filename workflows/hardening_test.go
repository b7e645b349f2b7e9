package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/results"
)

// echoCalls is one reply of n echo calls, all with the same id when id is
// set (some models reuse "call_0"), else with ids e1..en.
func echoCalls(n int, id string) results.Message {
	cs := make([]results.ToolCall, n)
	for i := range cs {
		cid := id
		if cid == "" {
			cid = fmt.Sprintf("e%d", i+1)
		}
		cs[i] = tc(cid, "echo", fmt.Sprintf(`{"text":"%d"}`, i+1))
	}
	return calls("", cs...)
}

func TestCallsBeyondThePerStepCapFailWithoutRunning(t *testing.T) {
	h := newHarness(t, echoCalls(5, ""), results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}, Policy: Policy{MaxCallsPerStep: 3}})

	require.Equal(t, StatusCompleted, res.Status)
	require.Len(t, h.log.all(), 3, "only the first three calls run")
	texts := toolTexts(h.model.last())
	require.Len(t, texts, 5, "every call still gets its tool message")
	for i, c := range res.Cards {
		if i < 3 {
			require.Equal(t, results.StateSucceeded, c.State, c.CallID)
			continue
		}
		require.Equal(t, results.StateFailed, c.State, c.CallID)
		require.Equal(t, results.FailureToolError, c.Failure.Reason)
		require.Contains(t, c.Failure.Message, "this reply made 5 tool calls and a step runs at most 3 (policy.max_calls_per_step)")
	}
}

// A reply of 2,000 calls sharing one id used to trip the deadlock
// detector (quadratic id de-duplication per call) and leave the turn
// running for ever; now the ids stay unique, the default cap holds, and
// the turn ends.
func TestThousandsOfCallsSharingAnIDEndTheTurn(t *testing.T) {
	h := newHarness(t, echoCalls(2000, "call_0"), results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}})

	require.Equal(t, StatusCompleted, res.Status)
	require.Len(t, h.log.all(), defaultMaxCallsPerStep)
	// The result shows the last cards and counts the others; the cards
	// query pages through them all.
	require.Len(t, res.Cards, stateCards)
	require.Equal(t, 2000-stateCards, res.Omitted.Total)
	var all []results.Card
	for len(all) < 2000 {
		v, err := h.env.QueryWorkflow(CardsQuery, CardsPage{Offset: len(all)})
		require.NoError(t, err)
		var page Cards
		require.NoError(t, v.Get(&page))
		require.Equal(t, 2000, page.Total)
		require.LessOrEqual(t, len(page.Cards), maxCardsPage)
		all = append(all, page.Cards...)
	}
	seen := map[string]bool{}
	for _, c := range all {
		require.False(t, seen[c.CallID], "duplicate call id %s", c.CallID)
		seen[c.CallID] = true
	}
	require.Equal(t, "call_0", all[0].CallID)
	require.Equal(t, "call_0_2000", all[1999].CallID)
	require.Equal(t, all[1900:], res.Cards)
}

func TestOversizedArgumentsFailWithoutRunning(t *testing.T) {
	big := strings.Repeat("x", maxArgumentBytes)
	h := newHarness(t, calls("", tc("e1", "echo", `{"text":"`+big+`"}`)), results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}})

	c := res.Cards[0]
	require.Equal(t, results.StateFailed, c.State)
	require.Contains(t, c.Failure.Message, fmt.Sprintf("a call's arguments may be at most %d", maxArgumentBytes))
	require.Empty(t, h.log.all())
	require.Less(t, len(c.Arguments), 5<<10, "the card keeps a bounded excerpt, not the whole payload")
}

func TestUnusableModelCallIDsAreReplaced(t *testing.T) {
	long := strings.Repeat("a", maxCallIDBytes+1)
	h := newHarness(t, calls("", tc(long, "echo", `{"text":"1"}`), tc("bad/id\n", "echo", `{"text":"2"}`)), results.AssistantText("done"))
	res := h.run(t, Input{Prompt: "p", Tools: []string{"echo"}})

	require.Equal(t, "call_1_1", res.Cards[0].CallID)
	require.Equal(t, "call_1_2", res.Cards[1].CallID)
	require.Equal(t, long, res.Cards[0].ModelCallID)
	require.Equal(t, "bad/id\n", res.Cards[1].ModelCallID)
	// The provider still gets its own ids back.
	var ids []string
	for _, m := range h.model.last() {
		if m.Role == results.RoleTool {
			ids = append(ids, m.ToolCallID)
		}
	}
	require.Equal(t, []string{long, "bad/id\n"}, ids)
}

func TestOversizedResponseFieldsAreRejected(t *testing.T) {
	huge := strings.Repeat("r", maxReasonBytes+1)
	cases := []struct {
		name string
		r    Response
		want string
	}{
		{"reason", Response{CallID: "w1", Decision: results.DecisionDeny, Reason: huge}, fmt.Sprintf("reason is %d bytes; it may be at most %d", len(huge), maxReasonBytes)},
		{"by", Response{CallID: "w1", Decision: results.DecisionDeny, By: strings.Repeat("b", maxByBytes+1)}, "by is 257 bytes"},
		{"arguments", Response{CallID: "w1", Decision: results.DecisionApprove, Arguments: json.RawMessage(`{"path":"a","content":"` + strings.Repeat("c", maxArgumentBytes) + `"}`)}, "arguments is"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, calls("", writeCall), results.AssistantText("ok"))
			var got updateOutcome
			h.respond(time.Minute, tc.r, &got)
			h.respond(2*time.Minute, Response{CallID: "w1", Decision: results.DecisionDeny, Reason: "no"}, nil)
			res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

			require.ErrorContains(t, got.rejected, tc.want)
			require.Equal(t, "no", res.Cards[0].Reason, "the rejected response changed nothing")
		})
	}
}

var writeCall = tc("w1", "write", `{"path":"a","content":"b"}`)

func TestAPersonsLongReasonIsTruncatedForTheModel(t *testing.T) {
	reason := strings.Repeat("because ", maxReasonBytes/8)
	h := newHarness(t, calls("", writeCall), results.AssistantText("ok"))
	h.respond(time.Minute, Response{CallID: "w1", Decision: results.DecisionDeny, Reason: reason}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

	require.Equal(t, reason, res.Cards[0].Reason, "the card keeps what the person wrote")
	text := toolTexts(h.model.last())[0]
	require.Less(t, len(text), results.MaxPersonText+300)
	require.Contains(t, text, "[truncated]")
}

func TestAnAnswerCarryingArgumentsIsRejected(t *testing.T) {
	h := newHarness(t, calls("", tc("a1", "ask", `{"prompt":"tone?"}`)), results.AssistantText("ok"))
	var got updateOutcome
	h.respond(time.Minute, Response{CallID: "a1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"formal"`), Arguments: json.RawMessage(`{"prompt":"x"}`)}, &got)
	h.respond(2*time.Minute, Response{CallID: "a1", Decision: results.DecisionAnswer, Answer: json.RawMessage(`"casual"`)}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"ask"}})

	require.ErrorContains(t, got.rejected, "arguments only go with approve")
	require.Equal(t, []string{"ask:casual"}, h.log.all())
	require.Len(t, res.Cards[0].Decisions, 1)
	require.Empty(t, res.Cards[0].Decisions[0].Arguments)
}

// A handoff ends the turn at once, even while another call of its step
// waits for approval; approving that call afterwards runs nothing.
func TestTransferRefusesCallsStillWaiting(t *testing.T) {
	h := newHarness(t, calls("", writeCall, tc("h1", "handoff", `{"text":"billing"}`)))
	h.respond(time.Hour, Response{CallID: "w1", Decision: results.DecisionApprove}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write", "handoff"}})

	require.Equal(t, StatusTransferred, res.Status)
	require.Equal(t, "billing", res.Transfer.Target)
	w := res.Cards[0]
	require.Equal(t, results.StateRefused, w.State)
	require.Equal(t, "the conversation was transferred to billing while this call waited", w.Reason)
	require.Empty(t, h.log.all(), "the waiting write never ran")
	require.Less(t, h.env.Now().Sub(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)), time.Hour, "the turn did not wait for the approval")
	require.Len(t, toolTexts(res.Messages), 2)
}

// Signals the data converter cannot decode are counted like any other
// invalid one; the SDK used to drop them without a trace.
func TestUndecodableSignalsAreCounted(t *testing.T) {
	h := newHarness(t, calls("", writeCall), results.AssistantText("ok"))
	garbage := converter.NewRawValue(&commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingProto), converter.MetadataMessageType: []byte("temporal.api.common.v1.Payloads")},
		Data:     []byte{0xff, 0x01, 0x02},
	})
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(RespondName, garbage) }, time.Minute)
	var mid State
	h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, 2*time.Minute)
	h.respond(3*time.Minute, Response{CallID: "w1", Decision: results.DecisionDeny, Reason: "no"}, nil)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

	require.Equal(t, 1, mid.InvalidSignals)
	require.Contains(t, mid.LastInvalidSignal, "the payload is not a respond object")
	require.Equal(t, 1, res.InvalidSignals)
}

func TestPolicyLimitsAreValidated(t *testing.T) {
	for _, p := range []Policy{{MaxCallsPerStep: -1}, {MaxCallsPerStep: maxCallsPerStepCeiling + 1}, {MaxHistoryEvents: maxHistoryEventsCeiling + 1}, {MaxHistoryBytes: -5}} {
		err := validateInput(Input{Prompt: "p", Model: "m", Policy: p})
		require.Error(t, err, "%+v", p)
	}
	require.NoError(t, validateInput(Input{Prompt: "p", Model: "m", Policy: Policy{MaxCallsPerStep: 8, MaxHistoryEvents: 500, MaxHistoryBytes: 1 << 20}}))
}
