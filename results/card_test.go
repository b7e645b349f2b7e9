package results_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

func TestStatesAreTheClosedSet(t *testing.T) {
	require.Equal(t, []results.State{
		"pending_approval", "waiting_answer", "waiting_connection", "running", "succeeded", "failed", "refused",
	}, results.States)

	seen := map[results.State]bool{}
	for _, g := range goldenCards() {
		require.NoError(t, g.c.Validate(), g.name)
		seen[g.c.State] = true
	}
	for _, s := range results.States {
		require.True(t, seen[s], "no golden card in state %s", s)
	}
}

func TestStateFinalAndWaiting(t *testing.T) {
	tests := []struct {
		state          results.State
		final, waiting bool
	}{
		{results.StatePendingApproval, false, true},
		{results.StateWaitingAnswer, false, true},
		{results.StateWaitingConnection, false, true},
		{results.StateRunning, false, false},
		{results.StateSucceeded, true, false},
		{results.StateFailed, true, false},
		{results.StateRefused, true, false},
		{"", false, false},
		{"teleport", false, false},
	}
	require.Len(t, tests, len(results.States)+2, "every state needs a row")
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			require.Equal(t, tt.final, tt.state.Final())
			require.Equal(t, tt.waiting, tt.state.Waiting())
		})
	}
}

func TestEffectiveArguments(t *testing.T) {
	c := results.Card{Arguments: json.RawMessage(`{"a":1}`)}
	require.Equal(t, json.RawMessage(`{"a":1}`), c.EffectiveArguments())
	c.EditedArguments = json.RawMessage(`{"a":2}`)
	require.Equal(t, json.RawMessage(`{"a":2}`), c.EffectiveArguments())
	c.EditedArguments = json.RawMessage{}
	require.Equal(t, json.RawMessage(`{"a":1}`), c.EffectiveArguments())
}

// validCard returns a minimal valid card in state s.
func validCard(s results.State) results.Card {
	c := results.Card{CallID: "c1", Tool: "t", Arguments: json.RawMessage(`{}`), State: s}
	switch s {
	case results.StateWaitingAnswer:
		c.Interrupt = &results.Interrupt{Type: results.InterruptQuestion, Prompt: "?"}
	case results.StateWaitingConnection:
		c.Connection = &results.ConnectionRequired{Provider: "github"}
	case results.StateFailed:
		c.Failure = &results.Failure{Reason: results.FailureToolError, Message: "boom"}
	case results.StateRefused:
		c.Reason = "no"
	}
	return c
}

// cardFields sets each optional field of a card to a valid value, so that
// the state alone decides whether the card is allowed to carry it.
var cardFields = []struct {
	name string
	set  func(*results.Card)
}{
	{"interrupt", func(c *results.Card) {
		// The interrupt type must suit the state; that rule is tested
		// separately.
		typ := results.InterruptApproval
		if c.State == results.StateWaitingAnswer {
			typ = results.InterruptQuestion
		}
		c.Interrupt = &results.Interrupt{Type: typ, Prompt: "p"}
	}},
	{"connection", func(c *results.Card) { c.Connection = &results.ConnectionRequired{Provider: "slack"} }},
	{"output", func(c *results.Card) { c.Output = &results.Success{Parts: []results.Part{results.TextPart("x")}} }},
	{"transfer", func(c *results.Card) { c.Transfer = &results.Transfer{Target: "other"} }},
	{"failure", func(c *results.Card) { c.Failure = &results.Failure{Reason: results.FailureToolError, Message: "m"} }},
	{"reason", func(c *results.Card) { c.Reason = "because" }},
}

func TestCardValidateFieldsPerState(t *testing.T) {
	allowed := map[results.State][]string{
		results.StatePendingApproval:   {"interrupt"},
		results.StateWaitingAnswer:     {"interrupt"},
		results.StateWaitingConnection: {"connection"},
		results.StateRunning:           nil,
		results.StateSucceeded:         {"output", "transfer"},
		results.StateFailed:            {"failure"},
		results.StateRefused:           {"reason"},
	}
	require.Len(t, allowed, len(results.States))
	for _, s := range results.States {
		require.NoError(t, validCard(s).Validate(), "minimal %s card", s)
		for _, f := range cardFields {
			t.Run(string(s)+"/"+f.name, func(t *testing.T) {
				c := validCard(s)
				f.set(&c)
				err := c.Validate()
				ok := false
				for _, a := range allowed[s] {
					ok = ok || a == f.name
				}
				if ok {
					require.NoError(t, err)
				} else {
					require.ErrorContains(t, err, "in state "+string(s)+" must not carry "+f.name)
				}
			})
		}
	}
}

func TestCardValidateRejectsMalformed(t *testing.T) {
	with := func(s results.State, mod func(*results.Card)) results.Card {
		c := validCard(s)
		mod(&c)
		return c
	}
	tests := []struct {
		name    string
		c       results.Card
		wantErr string
	}{
		{"zero card", results.Card{}, "card has no call_id"},
		{"no tool", with(results.StateRunning, func(c *results.Card) { c.Tool = "" }), "card c1 has no tool"},
		{"no state", with(results.StateRunning, func(c *results.Card) { c.State = "" }), "card c1 has no state"},
		{"unknown state", with(results.StateRunning, func(c *results.Card) { c.State = "teleport" }), `unknown state "teleport"`},
		{"pending approval with a question", with(results.StatePendingApproval, func(c *results.Card) {
			c.Interrupt = &results.Interrupt{Type: results.InterruptQuestion, Prompt: "?"}
		}), "pending approval but its interrupt is a question"},
		{"pending approval with an invalid interrupt", with(results.StatePendingApproval, func(c *results.Card) {
			c.Interrupt = &results.Interrupt{Type: results.InterruptApproval, Schema: json.RawMessage(`{`)}
		}), "card c1: interrupt schema is not valid JSON"},
		{"waiting answer without interrupt", with(results.StateWaitingAnswer, func(c *results.Card) { c.Interrupt = nil }), "waits for an answer but has no interrupt"},
		{"waiting answer with an approval", with(results.StateWaitingAnswer, func(c *results.Card) {
			c.Interrupt = &results.Interrupt{Type: results.InterruptApproval, Prompt: "ok?"}
		}), "its interrupt is an approval"},
		{"waiting answer with a choice without options", with(results.StateWaitingAnswer, func(c *results.Card) {
			c.Interrupt = &results.Interrupt{Type: results.InterruptChoice, Prompt: "which?"}
		}), "choice interrupt has no options"},
		{"waiting connection without connection", with(results.StateWaitingConnection, func(c *results.Card) { c.Connection = nil }), "waits for a connection but names none"},
		{"waiting connection without provider", with(results.StateWaitingConnection, func(c *results.Card) { c.Connection.Provider = "" }), "names no provider"},
		{"failed without failure", with(results.StateFailed, func(c *results.Card) { c.Failure = nil }), "failed without a failure"},
		{"failure without reason", with(results.StateFailed, func(c *results.Card) { c.Failure.Reason = "" }), "failure has no reason"},
		{"failure of unknown reason", with(results.StateFailed, func(c *results.Card) { c.Failure.Reason = "cosmic_ray" }), `unknown failure reason "cosmic_ray"`},
		{"tool_error failure without message", with(results.StateFailed, func(c *results.Card) { c.Failure.Message = "" }), "tool_error failure has an empty message"},
		{"internal failure without ref", with(results.StateFailed, func(c *results.Card) {
			c.Failure = &results.Failure{Reason: results.FailureInternal, Detail: "d"}
		}), "internal_error failure has no reference id"},
		{"refused without reason", with(results.StateRefused, func(c *results.Card) { c.Reason = "" }), "refused without a reason"},
		{"succeeded with output and transfer", with(results.StateSucceeded, func(c *results.Card) {
			c.Output = &results.Success{}
			c.Transfer = &results.Transfer{Target: "x"}
		}), "carries both output and transfer"},
		{"succeeded with a malformed output", with(results.StateSucceeded, func(c *results.Card) {
			c.Output = &results.Success{Parts: []results.Part{{Type: "hologram"}}}
		}), `output: success part 0: unknown part type "hologram"`},
		{"succeeded with output source without url", with(results.StateSucceeded, func(c *results.Card) {
			c.Output = &results.Success{Sources: []results.Source{{Title: "t"}}}
		}), "source 0 has no url"},
		{"transfer without target", with(results.StateSucceeded, func(c *results.Card) { c.Transfer = &results.Transfer{} }), "transfers to no target"},
		{"unknown decision", with(results.StateRunning, func(c *results.Card) {
			c.Decisions = []results.Decision{{Decision: results.DecisionApprove}, {Decision: "shrug"}}
		}), `decision 1: unknown decision "shrug"`},
		{"decision without kind", with(results.StateRunning, func(c *results.Card) {
			c.Decisions = []results.Decision{{}}
		}), `unknown decision ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorContains(t, tt.c.Validate(), tt.wantErr)
			_, err := json.Marshal(tt.c)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestCardValidateAccepts(t *testing.T) {
	tests := []struct {
		name string
		c    results.Card
	}{
		{"outcome unknown without message", results.Card{CallID: "c", Tool: "t", State: results.StateFailed,
			Failure: &results.Failure{Reason: results.FailureOutcomeUnknown}}},
		{"no arguments", results.Card{CallID: "c", Tool: "t", State: results.StateRunning}},
		{"arguments the model garbled", results.Card{CallID: "c", Tool: "t", State: results.StateRunning, Arguments: json.RawMessage(`{"a":`)}},
		{"every decision kind", results.Card{CallID: "c", Tool: "t", State: results.StateRunning, Decisions: []results.Decision{
			{Decision: results.DecisionApprove}, {Decision: results.DecisionDeny}, {Decision: results.DecisionAnswer},
			{Decision: results.DecisionConnected}, {Decision: results.DecisionCancel}, {Decision: results.DecisionTimeout},
		}}},
		{"waiting answer with a choice", results.Card{CallID: "c", Tool: "t", State: results.StateWaitingAnswer,
			Interrupt: &results.Interrupt{Type: results.InterruptChoice, Options: []results.Option{{ID: "a"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.c.Validate())
		})
	}
}

func TestCardSummary(t *testing.T) {
	cards := map[string]results.Card{}
	for _, g := range goldenCards() {
		cards[g.name] = g.c
	}
	long := strings.Repeat("é", 100)
	tests := []struct {
		name string
		c    results.Card
		want string
	}{
		{"pending approval shows arguments", cards["card_pending_approval"], `call_1 delete_file: pending approval {"path":"/tmp/report.csv"}`},
		{"pending approval shows edited arguments", func() results.Card {
			c := cards["card_pending_approval"]
			c.EditedArguments = json.RawMessage(`{"path":"/tmp/other.csv"}`)
			return c
		}(), `call_1 delete_file: pending approval {"path":"/tmp/other.csv"}`},
		{"pending approval without arguments", results.Card{CallID: "c", Tool: "t", State: results.StatePendingApproval}, "c t: pending approval"},
		{"pending approval shows plan", cards["card_pending_approval_plan"], "call_2 deploy: pending approval: kubectl apply -f prod.yaml"},
		{"waiting answer", cards["card_waiting_answer"], "call_3 book_flight: waiting for an answer: Which flight?"},
		{"waiting connection", cards["card_waiting_connection"], "call_4 list_repos: waiting for a github connection"},
		{"running", cards["card_running"], "call_5 shell: running"},
		{"succeeded with text", cards["card_succeeded"], `call_6 search: succeeded: Found 2 files matching "*.go".`},
		{"succeeded with media first", results.Card{CallID: "c", Tool: "t", State: results.StateSucceeded,
			Output: &results.Success{Parts: []results.Part{results.MediaPart("image/png", nil)}}}, "c t: succeeded: [image/png]"},
		{"succeeded with json first", results.Card{CallID: "c", Tool: "t", State: results.StateSucceeded,
			Output: &results.Success{Parts: []results.Part{results.JSONPart(json.RawMessage(`{"a": 1}`))}}}, `c t: succeeded: {"a": 1}`},
		{"succeeded skips parts of unknown type", results.Card{CallID: "c", Tool: "t", State: results.StateSucceeded,
			Output: &results.Success{Parts: []results.Part{{Type: "hologram", Text: "h"}, results.TextPart("x")}}}, "c t: succeeded: x"},
		{"succeeded with only unknown parts", results.Card{CallID: "c", Tool: "t", State: results.StateSucceeded,
			Output: &results.Success{Parts: []results.Part{{Type: "hologram", Text: "h"}}}}, "c t: succeeded: "},
		{"succeeded silently", cards["card_succeeded_silent"], "call_7 touch: succeeded silently"},
		{"succeeded with empty output", results.Card{CallID: "c", Tool: "t", State: results.StateSucceeded, Output: &results.Success{}}, "c t: succeeded silently"},
		{"transferred", cards["card_succeeded_transfer"], "call_8 handoff: transferred to billing"},
		{"failed tool error", cards["card_failed"], "call_9 read_file: failed: no such file: /tmp/report.csv"},
		{"failed internal", cards["card_failed_internal"], "call_10 query_db: failed: internal error (ref ref-7f3a)"},
		{"failed outcome unknown", cards["card_failed_outcome_unknown"], "call_11 send_payment: failed: " + results.OutcomeUnknownMessage[:79] + "…"},
		{"failed outcome unknown without message", results.Card{CallID: "c", Tool: "t", State: results.StateFailed,
			Failure: &results.Failure{Reason: results.FailureOutcomeUnknown}}, "c t: failed: " + results.OutcomeUnknownMessage[:79] + "…"},
		{"refused", cards["card_refused"], "call_12 delete_file: refused: the user does not want files deleted"},
		{"newlines flattened", results.Card{CallID: "c", Tool: "t", State: results.StateRefused, Reason: "line one\n\tline two  "}, "c t: refused: line one line two"},
		{"long text cut on a rune", results.Card{CallID: "c", Tool: "t", State: results.StateRefused, Reason: long}, "c t: refused: " + long[:78] + "…"},
		// Summary is what logs print when things have gone wrong, so it
		// must cope with cards that are not valid.
		{"zero card", results.Card{}, ": "},
		{"unknown state", results.Card{CallID: "c", Tool: "t", State: "teleport"}, "c t: teleport"},
		{"waiting answer without interrupt", results.Card{CallID: "c", Tool: "t", State: results.StateWaitingAnswer}, "c t: waiting for an answer"},
		{"waiting connection without connection", results.Card{CallID: "c", Tool: "t", State: results.StateWaitingConnection}, "c t: waiting for a connection"},
		{"failed without failure", results.Card{CallID: "c", Tool: "t", State: results.StateFailed}, "c t: failed"},
		{"model-chosen tool name cannot break the line", results.Card{CallID: "c", Tool: "evil\nINFO forged", State: results.StateRunning}, "c evil INFO forged: running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.c.Summary()
			require.Equal(t, tt.want, got)
			require.NotContains(t, got, "\n")
			require.True(t, utf8.ValidString(got))
		})
	}
}

func TestCardSummaryNeverShowsInternalDetail(t *testing.T) {
	const secret = "SECRET-password-hunter2"
	for _, reason := range []results.FailureReason{results.FailureInternal, results.FailureToolError, results.FailureOutcomeUnknown} {
		c := results.Card{CallID: "c", Tool: "t", State: results.StateFailed,
			Failure: &results.Failure{Reason: reason, Message: "visible", Ref: "r1", Detail: secret}}
		require.NotContains(t, c.Summary(), secret, reason)
	}
	// Message is documented as empty for internal errors; a caller who
	// puts the detail there anyway must not leak it either.
	c := results.Card{CallID: "c", Tool: "t", State: results.StateFailed,
		Failure: &results.Failure{Reason: results.FailureInternal, Message: secret, Ref: "r1"}}
	require.NotContains(t, c.Summary(), secret)
}

func TestSummaryShowsAnApprovalRulesProgress(t *testing.T) {
	c := results.Card{CallID: "r1", Tool: "refund", State: results.StatePendingApproval, Arguments: json.RawMessage(`{"amount":900}`),
		Approval: &results.Approval{Rule: "big_refund", Action: results.ApprovalRequireApproval, Group: "leads", Quorum: 2, Approvals: []string{"ann"}}}
	require.Equal(t, `r1 refund: pending approval {"amount":900} [rule big_refund, group leads, 1 of 2 approvals: ann]`, c.Summary())
	c.Approval.Escalated, c.Approval.EscalateGroup = true, "managers"
	require.Contains(t, c.Summary(), "group leads or managers (escalated)")
	c.Approval = &results.Approval{Rule: "drafts", Action: results.ApprovalAllow}
	require.Equal(t, `r1 refund: pending approval {"amount":900}`, c.Summary())
}
