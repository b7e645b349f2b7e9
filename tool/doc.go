// Package tool is Tollgate's tool SDK: a tool's Spec (what the model, the
// workflow and people need to know about it), the Tool interface, typed
// declaration from a Go function with Func, and the Registry a worker
// serves tools from.
//
// Declaring a tool:
//
//	type greetArgs struct {
//		Name string `json:"name" jsonschema:"who to greet"`
//	}
//
//	var Greet = tool.MustFunc(tool.Spec{
//		Name:        "greet",
//		Description: "Greet someone by name.",
//		Idempotent:  true,
//		Concurrent:  true,
//	}, func(ctx context.Context, call tool.Call, args greetArgs) (results.Outcome, error) {
//		if args.Name == "" {
//			return results.FailTool("name is empty"), nil
//		}
//		return results.SucceedText("Hello, " + args.Name + "!"), nil
//	})
//
// Register it with the worker's registry (tool.NewRegistry or
// Registry.Register) and list it in a turn's "tools".
//
// A tool that changes files can also show what a call would change before
// a person approves it: declare it with FuncWithPreview, or implement
// Previewer. The diff then appears on the waiting call's card.
package tool
