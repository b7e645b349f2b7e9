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

// A complete tool: spec, typed arguments (the schema is generated from the
// struct) and the run function. Register it and list it in a turn's tools.
func ExampleFunc() {
	greet := tool.MustFunc(tool.Spec{
		Name:        "greet",
		Description: "Greet someone by name.",
		Idempotent:  true,
		Concurrent:  true,
	}, func(ctx context.Context, call tool.Call, args greetArgs) (results.Outcome, error) {
		if args.Name == "" {
			return results.FailTool("name is empty"), nil
		}
		return results.SucceedText("Hello, " + args.Name + "!"), nil
	})
	registry, _ := tool.NewRegistry(greet)

	t, _ := registry.Get("greet")
	out, _ := t.Run(context.Background(), tool.Call{Arguments: json.RawMessage(`{"name":"Ada"}`)})
	fmt.Println(out.Success.Parts[0].Text)
	fmt.Println(string(t.Spec().Schema))
	// Output:
	// Hello, Ada!
	// {"type":"object","properties":{"name":{"type":"string","description":"who to greet"}},"required":["name"],"additionalProperties":false}
}
