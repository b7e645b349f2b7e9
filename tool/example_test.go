package tool_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

var Greet = tool.MustFunc(tool.Spec{
	Name:        "greet",
	Description: "Greet someone by name.",
	Idempotent:  true, // safe to retry
	Concurrent:  true, // may run beside other calls of the same step
	// Approval: tool.ApprovalAlways, Timeout: 30 * time.Second, ...
}, func(ctx context.Context, call tool.Call, args greetArgs) (results.Outcome, error) {
	if args.Name == "" {
		return results.FailTool("name is empty"), nil // the model sees this
	}
	return results.SucceedText("Hello, " + args.Name + "!"), nil
})

// A complete tool: spec, typed arguments (the schema is generated from the
// struct) and the run function. Register it and list it in a turn's tools.
func ExampleFunc() {
	registry, err := tool.NewRegistry(Greet)
	if err != nil {
		fmt.Println(err)
		return
	}
	t, _ := registry.Get("greet")
	out, _ := t.Run(context.Background(), tool.Call{Arguments: json.RawMessage(`{"name":"Ada"}`)})
	fmt.Println(out.Success.Parts[0].Text)
	fmt.Println(string(t.Spec().Schema))
	// Output:
	// Hello, Ada!
	// {"type":"object","properties":{"name":{"type":"string","description":"who to greet"}},"required":["name"],"additionalProperties":false}
}
