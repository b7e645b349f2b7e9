package results_test

import (
	"encoding/json"
	"time"

	"github.com/tollgate-dev/tollgate/results"
)

// t0 is UTC because decoding normalises decision times to UTC; a fixture in
// another zone would not compare equal after a round trip.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 500_000_000, time.UTC)

type namedOutcome struct {
	name string
	o    results.Outcome
}

type namedCard struct {
	name string
	c    results.Card
}

// pngBytes is not a real image; the codec only cares that it is bytes.
var pngBytes = []byte{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a}

func richSuccess() results.Outcome {
	o := results.Succeed(
		results.TextPart("Found 2 files matching \"*.go\"."),
		results.MediaPart("image/png", pngBytes),
		results.JSONPart(json.RawMessage(`{"count":2,"files":["a.go","b.go"]}`)),
	).WithSources(
		results.Source{URL: "https://example.com/a", Title: "Doc A"},
		results.Source{URL: "https://example.com/b"},
	).WithDiffs(
		results.FileDiff{Path: "a.go", Diff: "--- a/a.go\n+++ b/a.go\n@@ -1 +1 @@\n-old\n+new\n"},
	).WithWorkDir("src/pkg").WithDetails(json.RawMessage(`{"exit_code":0,"elapsed_ms":12}`))
	o.Success.Raw = "Found 2 files matching \"*.go\".\na.go\nb.go"
	o.Success.Truncated = true
	return o
}

// goldenOutcomes covers every Kind and every interrupt type. The values are
// in canonical form (compact JSON, nil for empty lists) so that decoding the
// golden file gives them back exactly.
func goldenOutcomes() []namedOutcome {
	return []namedOutcome{
		{"outcome_success", richSuccess()},
		{"outcome_success_silent", results.Succeed()},
		{"outcome_tool_error", results.FailTool("no such file: %s", "missing.txt")},
		{"outcome_internal_error", results.FailInternal("ref-7f3a", "pq: connection refused to 10.0.0.5:5432")},
		{"outcome_interrupt", results.NeedApproval("Delete 3 files?", "rm a.txt b.txt c.txt")},
		{"outcome_interrupt_choice", results.NeedChoice("Which region?", results.Option{ID: "eu", Label: "Europe"}, results.Option{ID: "us"})},
		{"outcome_interrupt_question", results.NeedAnswer("What is the ticket number?", json.RawMessage(`{"type":"integer","minimum":1}`))},
		{"outcome_connection_required", results.NeedConnection("github", "https://example.com/connect/github", "repo", "read:org")},
		{"outcome_transfer", results.TransferTo("billing", "The customer asks about an invoice.")},
	}
}

func goldenCards() []namedCard {
	args := json.RawMessage(`{"path":"/tmp/report.csv"}`)
	return []namedCard{
		{"card_pending_approval", results.Card{
			CallID: "call_1", Tool: "delete_file", Arguments: args,
			State: results.StatePendingApproval,
		}},
		{"card_pending_approval_preview", results.Card{
			CallID: "call_14", Tool: "edit_file", Arguments: json.RawMessage(`{"path":"main.go","old_string":"v1","new_string":"v2"}`),
			State: results.StatePendingApproval,
			Preview: []results.FileDiff{
				{Path: "main.go", Diff: "--- a/main.go\n+++ b/main.go\n@@ -1 +1 @@\n-const version = \"v1\"\n+const version = \"v2\"\n"},
			},
		}},
		{"card_pending_approval_preview_note", results.Card{
			CallID: "call_15", Tool: "edit_file", Arguments: json.RawMessage(`{"path":"main.go","old_string":"v3","new_string":"v4"}`),
			State:       results.StatePendingApproval,
			PreviewNote: "edit_file would fail: old_string was not found in main.go; read the file and copy the text exactly",
		}},
		{"card_pending_approval_plan", results.Card{
			CallID: "call_2", Tool: "deploy", Arguments: json.RawMessage(`{"env":"prod"}`),
			State:     results.StatePendingApproval,
			Interrupt: &results.Interrupt{Type: results.InterruptApproval, Prompt: "Deploy to prod?", Plan: "kubectl apply -f prod.yaml"},
		}},
		{"card_waiting_answer", results.Card{
			CallID: "call_3", Tool: "book_flight", Arguments: json.RawMessage(`{"to":"LIS"}`),
			State: results.StateWaitingAnswer,
			Interrupt: &results.Interrupt{Type: results.InterruptChoice, Prompt: "Which flight?", Options: []results.Option{
				{ID: "tp1", Label: "08:10 TP"}, {ID: "fr2", Label: "11:45 FR"},
			}},
		}},
		{"card_waiting_connection", results.Card{
			CallID: "call_4", Tool: "list_repos", Arguments: json.RawMessage(`{}`),
			State:      results.StateWaitingConnection,
			Connection: &results.ConnectionRequired{Provider: "github", Scopes: []string{"repo"}, Hint: "https://example.com/connect/github"},
		}},
		{"card_running", results.Card{
			CallID: "call_5", Tool: "shell", Arguments: json.RawMessage(`{"cmd":"make test"}`),
			State: results.StateRunning,
		}},
		{"card_succeeded", results.Card{
			CallID: "call_6", Tool: "search", Arguments: json.RawMessage(`{"q":"temporal"}`),
			State:  results.StateSucceeded,
			Output: richSuccess().Success,
		}},
		{"card_succeeded_silent", results.Card{
			CallID: "call_7", Tool: "touch", Arguments: args,
			State: results.StateSucceeded,
		}},
		{"card_succeeded_transfer", results.Card{
			CallID: "call_8", Tool: "handoff", Arguments: json.RawMessage(`{"to":"billing"}`),
			State:    results.StateSucceeded,
			Transfer: &results.Transfer{Target: "billing", Message: "Invoice question."},
		}},
		{"card_failed", results.Card{
			CallID: "call_9", Tool: "read_file", Arguments: args,
			State:   results.StateFailed,
			Failure: &results.Failure{Reason: results.FailureToolError, Message: "no such file: /tmp/report.csv"},
		}},
		{"card_failed_internal", results.Card{
			CallID: "call_10", Tool: "query_db", Arguments: json.RawMessage(`{"sql":"select 1"}`),
			State:   results.StateFailed,
			Failure: &results.Failure{Reason: results.FailureInternal, Ref: "ref-7f3a", Detail: "pq: password authentication failed for user \"app\""},
		}},
		{"card_failed_outcome_unknown", results.Card{
			CallID: "call_11", Tool: "send_payment", Arguments: json.RawMessage(`{"amount":100}`),
			State:   results.StateFailed,
			Failure: &results.Failure{Reason: results.FailureOutcomeUnknown, Message: results.OutcomeUnknownMessage},
		}},
		{"card_refused", results.Card{
			CallID: "call_12", Tool: "delete_file", Arguments: args,
			State:  results.StateRefused,
			Reason: "the user does not want files deleted",
			Decisions: []results.Decision{
				{Decision: results.DecisionDeny, By: "alice@example.com", At: t0, Reason: "the user does not want files deleted"},
			},
		}},
		{"card_decisions_edited", results.Card{
			CallID: "call_13", Tool: "send_email", Arguments: json.RawMessage(`{"to":"all@example.com","body":"hi"}`),
			EditedArguments: json.RawMessage(`{"to":"team@example.com","body":"hi"}`),
			State:           results.StateSucceeded,
			Output:          &results.Success{Parts: []results.Part{results.TextPart("sent")}},
			Decisions: []results.Decision{
				{Decision: results.DecisionAnswer, By: "bob", At: t0, Answer: json.RawMessage(`"team only"`)},
				{Decision: results.DecisionApprove, By: "alice@example.com", At: t0.Add(90 * time.Second), Reason: "narrowed the audience", Arguments: json.RawMessage(`{"to":"team@example.com","body":"hi"}`)},
			},
		}},
	}
}
