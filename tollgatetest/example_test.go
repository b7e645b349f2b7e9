package tollgatetest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// The test model plays its replies by position: reply i answers a
// conversation that already holds i assistant messages, so a retried
// model call gets the same reply. It records what it was asked.
func ExampleNewModel() {
	m := tollgatetest.NewModel(
		tollgatetest.Reply("Let me look.", tollgatetest.Call("c1", "read_file", map[string]string{"path": "notes.txt"})),
		tollgatetest.Reply("The notes are about the billing export."),
	)
	ctx := context.Background()
	first, _ := m.Complete(ctx, model.Request{Messages: []results.Message{results.UserText("What is in notes.txt?")}})
	fmt.Println(first.Message.Text())
	for _, c := range first.Message.ToolCalls {
		fmt.Println(c.ID, c.Name, c.Arguments)
	}
	second, _ := m.Complete(ctx, model.Request{Messages: []results.Message{
		results.UserText("What is in notes.txt?"),
		first.Message,
		{Role: results.RoleTool, ToolCallID: "c1", ToolName: "read_file", Parts: []results.Part{results.TextPart("billing export ...")}},
	}})
	fmt.Println(second.Message.Text())
	fmt.Println(len(m.Requests()), "requests")
	// Output:
	// Let me look.
	// c1 read_file {"path":"notes.txt"}
	// The notes are about the billing export.
	// 2 requests
}

// A replay test for your agent: every recorded history replays against
// this build's AgentTurn, or the result names the file and what differs.
func ExampleReplay() {
	corpus := filepath.Join("..", "workflows", "testdata", "histories", "approval_approved.json")
	for _, r := range tollgatetest.Replay(context.Background(), "", corpus) {
		fmt.Println(filepath.Base(r.File), r.Err == nil, r.Events > 0)
	}
	// Output:
	// approval_approved.json true true
}

type memoArgs struct {
	Text string `json:"text"`
}

// A turn in the SDK's test environment, from a test of your own: your
// tools, the test model, and answers delivered at given (virtual) times.
// It needs the test's *testing.T, so this example only shows the test.
func ExampleNewTurn() {
	testSaveNote := func(t *testing.T) {
		save := tool.MustFunc(tool.Spec{Name: "save_note", Description: "Save a note.", Approval: tool.ApprovalAlways},
			func(ctx context.Context, call tool.Call, a memoArgs) (results.Outcome, error) {
				return results.SucceedText("saved"), nil
			})
		turn := tollgatetest.NewTurn(t, tollgate.Options{Tools: []tool.Tool{save}, NoBuiltins: true},
			tollgatetest.NewModel(
				tollgatetest.Reply("", tollgatetest.Call("n1", "save_note", memoArgs{Text: "call Ann"})),
				tollgatetest.Reply("Saved."),
			))
		turn.RespondAt(2*time.Hour, workflows.Response{CallID: "n1", Decision: results.DecisionApprove, By: "ann"})
		res, err := turn.Run(workflows.Input{Prompt: "Remember to call Ann", Tools: []string{"save_note"}})
		if err != nil || res.Status != workflows.StatusCompleted {
			t.Fatalf("the turn ended %s: %v", res.Status, err)
		}
	}
	_ = testSaveNote // func TestSaveNote(t *testing.T) in your package
}
