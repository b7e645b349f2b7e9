package workflows

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// fuzzTurn is a turn with one call in each state a response can meet,
// the approval one with an argument schema.
func fuzzTurn(t testing.TB) *turn {
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","maxLength":64},"content":{"type":"string"}},"required":["path","content"],"additionalProperties":false}`)
	compiled, err := tool.CompileSchema(schema)
	require.NoError(t, err)
	question, err := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 1}}, "required": []string{"n"}})
	require.NoError(t, err)
	tr := &turn{v: hardeningVersion, status: StatusRunning, byID: map[string]*call{}, schemas: map[string]*tool.Schema{"write": compiled}}
	add := func(card results.Card) {
		c := &call{card: card}
		tr.calls = append(tr.calls, c)
		tr.byID[card.CallID] = c
	}
	add(results.Card{CallID: "approve", Tool: "write", Arguments: json.RawMessage(`{"path":"a","content":"b"}`), State: results.StatePendingApproval})
	add(results.Card{CallID: "choice", Tool: "ask", State: results.StateWaitingAnswer, Interrupt: &results.Interrupt{Type: results.InterruptChoice, Prompt: "tone?", Options: []results.Option{{ID: "formal"}, {ID: "casual"}}}})
	add(results.Card{CallID: "question", Tool: "ask", State: results.StateWaitingAnswer, Interrupt: &results.Interrupt{Type: results.InterruptQuestion, Prompt: "how many?", Schema: question}})
	add(results.Card{CallID: "connect", Tool: "issues", State: results.StateWaitingConnection, Connection: &results.ConnectionRequired{Provider: "github"}})
	add(results.Card{CallID: "done", Tool: "write", State: results.StateSucceeded})
	return tr
}

// FuzzValidateResponse holds the validator to its promise whatever a
// Signal or Update carries: it never panics, every rejection says why, and
// what it accepts fits the wait it answers.
func FuzzValidateResponse(f *testing.F) {
	f.Add("approve", "approve", "", "alice", []byte(`{"path":"b","content":"c"}`), []byte(nil))
	f.Add("approve", "approve", "", "", []byte(`{"path":1}`), []byte(nil))
	f.Add("approve", "deny", "too risky", "bob", []byte(nil), []byte(nil))
	f.Add("choice", "answer", "", "", []byte(nil), []byte(`"formal"`))
	f.Add("choice", "answer", "", "", []byte(`{}`), []byte(`"formal"`))
	f.Add("question", "answer", "", "", []byte(nil), []byte(`{"n":3}`))
	f.Add("question", "answer", "", "", []byte(nil), []byte(`{"n":0}`))
	f.Add("connect", "connected", "", "", []byte(nil), []byte(nil))
	f.Add("connect", "cancel", "later", "", []byte(nil), []byte(`1`))
	f.Add("done", "approve", "", "", []byte(nil), []byte(nil))
	f.Add("nope", "approve", "", "", []byte(nil), []byte(nil))
	f.Add("", "", "", "", []byte(nil), []byte(nil))
	tr := fuzzTurn(f)
	f.Fuzz(func(t *testing.T, callID, decision, reason, by string, args, answer []byte) {
		r := Response{CallID: callID, Decision: results.DecisionKind(decision), Reason: reason, By: by, Arguments: args, Answer: answer}
		err := tr.validateResponse(r)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("a rejection with no sentence for %+v", r)
			}
			return
		}
		if checkResponseSize(r) != nil {
			t.Fatalf("accepted an oversized response: %v", checkResponseSize(r))
		}
		c := tr.find(callID)
		if c == nil || !c.card.State.Waiting() || !slices.Contains(fits[r.Decision], c.card.State) {
			t.Fatalf("accepted %s for call %q, which does not wait for it", r.Decision, callID)
		}
		if len(args) > 0 && (r.Decision != results.DecisionApprove || tr.schemas[c.card.Tool].Validate(args) != nil) {
			t.Fatalf("accepted arguments %q with %s", args, r.Decision)
		}
		if len(answer) > 0 && r.Decision != results.DecisionAnswer {
			t.Fatalf("accepted an answer with %s", r.Decision)
		}
		if r.Decision == results.DecisionAnswer {
			if len(bytes.TrimSpace(answer)) == 0 || !json.Valid(answer) {
				t.Fatalf("accepted answer %q that is not JSON", answer)
			}
			if validateAnswer(c.card.Interrupt, answer) != nil {
				t.Fatalf("accepted answer %q that does not fit the question", answer)
			}
		}
	})
}
