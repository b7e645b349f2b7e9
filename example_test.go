package tollgate_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

type refundArgs struct {
	OrderID string `json:"order_id"`
}

// A worker of your own: the plugin on the client registers AgentTurn and
// its activities, with your tools, on every worker made from that client.
func ExampleNewPlugin() {
	refund := tool.MustFunc(tool.Spec{
		Name:        "refund",
		Description: "Refund an order.",
		Approval:    tool.ApprovalAlways, // a person approves every refund
	}, func(ctx context.Context, call tool.Call, args refundArgs) (results.Outcome, error) {
		return results.SucceedText("refunded order " + args.OrderID), nil
	})
	plugin, err := tollgate.NewPlugin(tollgate.Options{Tools: []tool.Tool{refund}})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(client.Options{Plugins: []client.Plugin{plugin}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w := worker.New(c, tollgate.DefaultTaskQueue, worker.Options{})
	if err := w.Run(worker.InterruptCh()); err != nil {
		log.Fatal(err)
	}
}

// A whole turn in the SDK's test environment, offline: the model calls a
// tool that needs approval, the turn parks, a person approves an hour
// later (virtual time), the tool runs and the model answers.
func ExamplePlugin_Register() {
	dir, err := os.MkdirTemp("", "tollgate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	refund := tool.MustFunc(tool.Spec{
		Name:        "refund",
		Description: "Refund an order.",
		Approval:    tool.ApprovalAlways,
	}, func(ctx context.Context, call tool.Call, args refundArgs) (results.Outcome, error) {
		return results.SucceedText("refunded order " + args.OrderID), nil
	})
	// A scripted model: reply i answers a conversation with i assistant
	// messages in it.
	model := tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("r1", "refund", refundArgs{OrderID: "1001"})),
		tollgatetest.Reply("Order 1001 is refunded."),
	)
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		DataDir:    filepath.Join(dir, "data"),
		Workspace:  filepath.Join(dir, "workspace"),
		Tools:      []tool.Tool{refund},
		NoBuiltins: true,
		Providers:  map[string]tollgate.Provider{"shop": model},
	})
	if err != nil {
		log.Fatal(err)
	}

	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	plugin.Register(env)

	approve := workflows.Response{CallID: "r1", Decision: results.DecisionApprove, By: "ann"}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.RespondName, tollgate.ResponseID(approve), &testsuite.TestUpdateCallback{
			OnAccept:   func() {},
			OnReject:   func(err error) { fmt.Println("refused:", err) },
			OnComplete: func(any, error) {},
		}, approve)
	}, time.Hour)
	env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Prompt: "Order 1001 arrived broken; please refund it.",
		Model:  "shop:support",
		Tools:  []string{"refund"},
	})

	var res workflows.Result
	if err := env.GetWorkflowResult(&res); err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Text)
	for _, c := range res.Cards {
		fmt.Println(c.Summary())
		for _, d := range c.Decisions {
			fmt.Println(" ", d.Decision, "by", d.By)
		}
	}
	// Output:
	// completed Order 1001 is refunded.
	// r1 refund: succeeded: refunded order 1001
	//   approve by ann
}

// Start, answer and read turns from Go, on a client with the plugin (or
// NewClientPlugin, for a program that runs no turns itself).
func ExampleClient() {
	plugin, err := tollgate.NewClientPlugin(".tollgate")
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(client.Options{Plugins: []client.Plugin{plugin}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	tg := tollgate.Client{Temporal: c}

	_, err = tg.Start(ctx, "refund-1001", workflows.Input{
		Prompt: "Order 1001 arrived broken; please refund it.",
		Model:  "openai:gpt-4.1",
		Tools:  []string{"refund"},
		User:   "ann",
	})
	if err != nil {
		log.Fatal(err)
	}
	state, err := tg.State(ctx, "refund-1001")
	if err != nil {
		log.Fatal(err)
	}
	for _, card := range state.Cards {
		if card.State != results.StatePendingApproval {
			continue
		}
		_, err := tg.Respond(ctx, "refund-1001", workflows.Response{CallID: card.CallID, Decision: results.DecisionApprove, By: "ann"})
		if rejected, ok := tollgate.AsRejection(err, "refund-1001"); ok {
			fmt.Println("the turn refused the answer:", rejected.Reason)
		} else if err != nil {
			log.Fatal(err) // no worker or no server: the same response may be sent again
		}
	}
	res, err := tg.Result(ctx, "refund-1001")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Text)
}

// Pinning: where workers do not share a workspace, the file and shell
// calls of a turn run on the worker that holds its workspace, on that
// worker's own workspace queue.
func ExamplePlugin_PinWorkspace() {
	c, err := client.Dial(client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	p, _ := tollgate.NewPlugin(tollgate.Options{Workspace: "/srv/ws"})
	queue := tollgate.WorkspaceQueue(tollgate.DefaultTaskQueue, "host-1")
	_ = p.PinWorkspace(queue) // before any worker starts
	ws := worker.New(c, queue, worker.Options{DisableWorkflowWorker: true})
	p.RegisterWorkspace(ws) // RunTool and PreviewTool only
	_ = ws.Start()
	w := worker.New(c, tollgate.DefaultTaskQueue, worker.Options{Plugins: []worker.Plugin{p}})
	_ = w.Run(worker.InterruptCh())
}

func ExampleWorkspaceQueue() {
	fmt.Println(tollgate.WorkspaceQueue(tollgate.DefaultTaskQueue, "host-1"))
	// Output:
	// tollgate/ws/host-1
}
