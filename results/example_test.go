package results_test

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate-dev/tollgate/results"
)

// A tool's success: text the model reads, and a source it can cite. The
// JSON is the wire form, versioned and discriminated by "kind".
func ExampleSucceedText() {
	out := results.SucceedText("The export job timed out twice.").
		WithSources(results.Source{URL: "https://status.example.com/incidents/42", Title: "Incident 42"})
	if err := out.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	b, _ := json.Marshal(out)
	fmt.Println(out.Kind)
	fmt.Println(string(b))
	// Output:
	// success
	// {"v":1,"kind":"success","success":{"parts":[{"type":"text","text":"The export job timed out twice."}],"sources":[{"url":"https://status.example.com/incidents/42","title":"Incident 42"}]}}
}

// A tool that needs a person returns an interrupt: the call parks as
// waiting_answer, and the tool runs again with the chosen option id in
// tool.Call.Resume.
func ExampleNeedChoice() {
	out := results.NeedChoice("Which tone should the summary take?",
		results.Option{ID: "friendly", Label: "Friendly"},
		results.Option{ID: "formal", Label: "Formal"})
	fmt.Println(out.Kind, out.Interrupt.Type)
	for _, o := range out.Interrupt.Options {
		fmt.Println(o.ID, o.Label)
	}
	// Output:
	// interrupt choice
	// friendly Friendly
	// formal Formal
}

// Render is what the model is shown for a final card. An internal error's
// detail stays with operators: the model reads a generic sentence with
// the reference id.
func ExampleRender() {
	card := results.Card{
		CallID:    "call_1",
		Tool:      "lookup_order",
		Arguments: json.RawMessage(`{"order_id":"1001"}`),
		State:     results.StateFailed,
		Failure: &results.Failure{
			Reason: results.FailureInternal,
			Ref:    "ref-7f3a",
			Detail: "dial tcp 10.0.0.12:5432: connection refused",
		},
	}
	msg, err := results.Render(card)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(msg.Role, msg.ToolCallID, msg.IsError)
	fmt.Println(msg.Text())
	fmt.Println(card.Summary())
	// Output:
	// tool call_1 true
	// {"error":"The tool failed because of an internal error (reference ref-7f3a). An operator has the details; try something else or tell the user."}
	// call_1 lookup_order: failed: internal error (ref ref-7f3a)
}

// A card that is not final has no message yet: every call gets exactly
// one, once it has one outcome.
func ExampleRender_notFinal() {
	_, err := results.Render(results.Card{CallID: "call_1", Tool: "write_file", Arguments: json.RawMessage(`{}`), State: results.StatePendingApproval})
	fmt.Println(err != nil)
	// Output:
	// true
}

// Truncate cuts what the model is shown by lines and bytes and marks the
// cut; the raw output is kept for people.
func ExampleTruncate() {
	s, cut := results.Truncate("line 1\nline 2\nline 3\n", results.Limits{MaxLines: 2})
	fmt.Printf("%q %v\n", s, cut)
	// Output:
	// "line 1\nline 2\n[truncated]" true
}
