package results_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

func succeeded(out *results.Success) results.Card {
	return results.Card{CallID: "call_1", Tool: "tool", Arguments: json.RawMessage(`{}`), State: results.StateSucceeded, Output: out}
}

func failed(f results.Failure) results.Card {
	return results.Card{CallID: "call_1", Tool: "tool", Arguments: json.RawMessage(`{}`), State: results.StateFailed, Failure: &f}
}

func toolMsg(isError bool, parts ...results.Part) results.Message {
	return results.Message{Role: results.RoleTool, ToolCallID: "call_1", ToolName: "tool", IsError: isError, Parts: parts}
}

func TestRender(t *testing.T) {
	png := results.MediaPart("image/png", pngBytes)
	silent := toolMsg(false, results.TextPart(results.SilentSuccessText))
	const editedNote = `Note: a person edited the arguments before approving; the tool ran with {"to":"team"} instead of what you sent.`
	withEdit := func(c results.Card) results.Card {
		c.EditedArguments = json.RawMessage("{\n  \"to\": \"team\"\n}")
		return c
	}
	tests := []struct {
		name string
		card results.Card
		want results.Message
	}{
		{"text parts joined in order", succeeded(&results.Success{Parts: []results.Part{
			results.TextPart("one"), results.TextPart("two"), results.TextPart("three"),
		}}), toolMsg(false, results.TextPart("one\ntwo\nthree"))},
		{"json parts compacted into the text", succeeded(&results.Success{Parts: []results.Part{
			results.TextPart("result:"), results.JSONPart(json.RawMessage("{\n  \"a\": [1, 2],\n  \"b\": \"<x>\"\n}")),
		}}), toolMsg(false, results.TextPart("result:\n{\"a\":[1,2],\"b\":\"<x>\"}"))},
		{"media kept as media parts between text", succeeded(&results.Success{Parts: []results.Part{
			results.TextPart("before"), png, results.TextPart("after"), results.JSONPart(json.RawMessage(`1`)),
		}}), toolMsg(false, results.TextPart("before"), png, results.TextPart("after\n1"))},
		{"media only", succeeded(&results.Success{Parts: []results.Part{png}}), toolMsg(false, png)},
		{"consecutive media", succeeded(&results.Success{Parts: []results.Part{png, png}}), toolMsg(false, png, png)},
		{"sources listed after the parts", succeeded(&results.Success{
			Parts:   []results.Part{results.TextPart("answer"), png},
			Sources: []results.Source{{URL: "https://a", Title: "A"}, {URL: "https://b"}},
		}), toolMsg(false, results.TextPart("answer"), png, results.TextPart("Sources:\n[1] A <https://a>\n[2] <https://b>"))},
		{"sources alone are not silent", succeeded(&results.Success{
			Sources: []results.Source{{URL: "https://a"}},
		}), toolMsg(false, results.TextPart("Sources:\n[1] <https://a>"))},
		{"silent success without output", succeeded(nil), silent},
		{"silent success with empty output", succeeded(&results.Success{}), silent},
		{"silent success with only empty text", succeeded(&results.Success{Parts: []results.Part{results.TextPart(""), results.TextPart("")}}), silent},
		{"empty text parts skipped", succeeded(&results.Success{Parts: []results.Part{results.TextPart(""), results.TextPart("x"), results.TextPart("")}}),
			toolMsg(false, results.TextPart("x"))},
		{"diffs, workdir, details, raw are not shown", succeeded(&results.Success{
			Diffs: []results.FileDiff{{Path: "a", Diff: "d"}}, WorkDir: "/w", Details: json.RawMessage(`{"k":1}`), Raw: "raw", Truncated: true,
		}), silent},
		{"transfer confirmation", results.Card{CallID: "call_1", Tool: "tool", State: results.StateSucceeded,
			Transfer: &results.Transfer{Target: "billing", Message: "handoff note"}},
			toolMsg(false, results.TextPart("Transferred the conversation to billing."))},
		{"tool error", failed(results.Failure{Reason: results.FailureToolError, Message: `no file "x.txt"`}),
			toolMsg(true, results.TextPart(`{"error":"no file \"x.txt\""}`))},
		{"internal error is a generic sentence with the reference", failed(results.Failure{Reason: results.FailureInternal, Ref: "ref-42", Detail: "db password wrong"}),
			toolMsg(true, results.TextPart(`{"error":"The tool failed because of an internal error (reference ref-42). An operator has the details; try something else or tell the user."}`))},
		{"outcome unknown", failed(results.Failure{Reason: results.FailureOutcomeUnknown, Message: results.OutcomeUnknownMessage}),
			toolMsg(true, results.TextPart(`{"error":"`+results.OutcomeUnknownMessage+`"}`))},
		{"outcome unknown without a message", failed(results.Failure{Reason: results.FailureOutcomeUnknown}),
			toolMsg(true, results.TextPart(`{"error":"`+results.OutcomeUnknownMessage+`"}`))},
		{"refused with reason and do not retry", results.Card{CallID: "call_1", Tool: "tool", State: results.StateRefused, Reason: "too risky"},
			toolMsg(true, results.TextPart(`{"error":"This call was refused and did not run: too risky. Do not retry the same call."}`))},
		{"edited arguments noted before a success", withEdit(succeeded(&results.Success{Parts: []results.Part{results.TextPart("sent")}})),
			toolMsg(false, results.TextPart(editedNote), results.TextPart("sent"))},
		{"edited arguments noted before a silent success", withEdit(succeeded(nil)),
			toolMsg(false, results.TextPart(editedNote), results.TextPart(results.SilentSuccessText))},
		{"edited arguments noted before a failure", withEdit(failed(results.Failure{Reason: results.FailureToolError, Message: "bounced"})),
			toolMsg(true, results.TextPart(editedNote), results.TextPart(`{"error":"bounced"}`))},
		{"edited arguments that are not JSON are shown as sent", func() results.Card {
			c := succeeded(nil)
			c.EditedArguments = json.RawMessage(`{oops`)
			return c
		}(), toolMsg(false, results.TextPart(`Note: a person edited the arguments before approving; the tool ran with {oops instead of what you sent.`), results.TextPart(results.SilentSuccessText))},
		{"edited arguments not claimed to have run when refused", withEdit(results.Card{CallID: "call_1", Tool: "tool", State: results.StateRefused, Reason: "no"}),
			toolMsg(true, results.TextPart(`{"error":"This call was refused and did not run: no. Do not retry the same call."}`))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := results.Render(tt.card)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			if got.IsError {
				// Error messages are one JSON object with an "error" string.
				var body map[string]string
				require.NoError(t, json.Unmarshal([]byte(got.Parts[len(got.Parts)-1].Text), &body))
				require.Len(t, body, 1)
				require.NotEmpty(t, body["error"])
			}
		})
	}
}

func TestRenderGoldenCards(t *testing.T) {
	// Every final golden card renders; every other one is refused with an
	// error naming the state, because a waiting call has no message yet.
	for _, g := range goldenCards() {
		t.Run(g.name, func(t *testing.T) {
			m, err := results.Render(g.c)
			if g.c.State.Final() {
				require.NoError(t, err)
				require.Equal(t, results.RoleTool, m.Role)
				require.Equal(t, g.c.CallID, m.ToolCallID)
				require.Equal(t, g.c.Tool, m.ToolName)
				require.NotEmpty(t, m.Text())
				require.Equal(t, g.c.State != results.StateSucceeded, m.IsError)
				return
			}
			require.ErrorContains(t, err, fmt.Sprintf("card %s is %s, not final", g.c.CallID, g.c.State))
			require.Equal(t, results.Message{}, m)
		})
	}
}

func TestRenderAnswersTheModelsCallID(t *testing.T) {
	c := results.Card{CallID: "call_0_2", ModelCallID: "call_0", Tool: "t", State: results.StateSucceeded}
	m, err := results.Render(c)
	require.NoError(t, err)
	require.Equal(t, "call_0", m.ToolCallID, "the provider matches results to calls by its own ids")

	// The id survives the card's encoding; a card without it (every card
	// written before it existed) encodes as it always did.
	b, err := json.Marshal(c)
	require.NoError(t, err)
	require.Contains(t, string(b), `"model_call_id":"call_0"`)
	var back results.Card
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, c, back)
	c.ModelCallID = ""
	b, err = json.Marshal(c)
	require.NoError(t, err)
	require.NotContains(t, string(b), "model_call_id")
}

func TestRenderInvalidCard(t *testing.T) {
	m, err := results.Render(results.Card{CallID: "c", Tool: "t", State: results.StateFailed})
	require.ErrorContains(t, err, "failed without a failure")
	require.Equal(t, results.Message{}, m)
}

// TestInternalDetailNeverReachesTheModel is the proof the design asks for:
// whatever else a card holds, the operator-only Detail of a failure and the
// log-only Details of a success appear in no message the model is sent.
func TestInternalDetailNeverReachesTheModel(t *testing.T) {
	const secret = "SECRET-7c1e-db-password"
	detailsJSON := json.RawMessage(`{"stderr":"` + secret + `","nested":{"token":"` + secret + `"}}`)

	var cards []results.Card
	edits := []json.RawMessage{nil, json.RawMessage(`{"x":1}`)}
	for i, edit := range edits {
		base := results.Card{CallID: fmt.Sprintf("call_%d", i), Tool: "tool", Arguments: json.RawMessage(`{"q":"public"}`), EditedArguments: edit,
			Decisions: []results.Decision{{Decision: results.DecisionApprove, By: "ops", At: t0}}}
		for _, reason := range []results.FailureReason{results.FailureInternal, results.FailureToolError, results.FailureOutcomeUnknown} {
			c := base
			c.State = results.StateFailed
			c.Failure = &results.Failure{Reason: reason, Message: "public message", Ref: "ref-1", Detail: secret}
			if reason == results.FailureInternal {
				// Message is meant to be empty for internal errors; put
				// the secret there too in case a caller gets that wrong.
				c.Failure.Message = secret
			}
			cards = append(cards, c)
		}
		for _, out := range []*results.Success{
			{Details: detailsJSON},
			{Parts: []results.Part{results.TextPart("visible")}, Details: detailsJSON},
			{Parts: []results.Part{results.MediaPart("image/png", pngBytes), results.JSONPart(json.RawMessage(`{"ok":true}`))}, Details: detailsJSON,
				Sources: []results.Source{{URL: "https://a"}}, Diffs: []results.FileDiff{{Path: "p", Diff: "d"}}, WorkDir: "/w"},
		} {
			c := base
			c.State = results.StateSucceeded
			c.Output = out
			cards = append(cards, c)
		}
		for _, g := range goldenCards() {
			if !g.c.State.Final() || (g.c.Failure == nil && g.c.Output == nil) {
				continue
			}
			c := g.c
			if c.Failure != nil {
				f := *c.Failure
				f.Detail = secret
				c.Failure = &f
			}
			if c.Output != nil {
				o := *c.Output
				o.Details = detailsJSON
				c.Output = &o
			}
			cards = append(cards, c)
		}
	}
	// Outcomes turned into cards the way a host does it must not leak
	// either.
	internal := results.FailInternal("ref-9", secret)
	cards = append(cards, results.Card{CallID: "from_outcome", Tool: "t", State: results.StateFailed,
		Failure: &results.Failure{Reason: results.FailureInternal, Ref: internal.Internal.Ref, Detail: internal.Internal.Detail}})
	success := results.SucceedText("fine").WithDetails(detailsJSON)
	cards = append(cards, results.Card{CallID: "from_success", Tool: "t", State: results.StateSucceeded, Output: success.Success})

	// The fixture must actually carry the secret, or the test proves
	// nothing.
	carrying := 0
	for _, c := range cards {
		b, err := json.Marshal(c)
		require.NoError(t, err)
		if strings.Contains(string(b), secret) {
			carrying++
		}
	}
	require.Equal(t, len(cards), carrying)

	var msgs []results.Message
	for _, c := range cards {
		m, err := results.Render(c)
		require.NoError(t, err, c.CallID)
		msgs = append(msgs, m)
	}
	stripped, media := results.SplitMedia(msgs)
	msgs = append(msgs, stripped...)
	require.NotNil(t, media)
	msgs = append(msgs, *media)

	for i, m := range msgs {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		require.NotContains(t, string(b), secret, "message %d", i)
		require.NotContains(t, m.Text(), secret, "message %d", i)
	}
	for _, c := range cards {
		if c.Failure != nil {
			require.NotContains(t, c.Summary(), secret)
		}
	}
}
