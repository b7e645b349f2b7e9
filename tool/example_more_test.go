package tool_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

type lookupArgs struct {
	ID string `json:"id" jsonschema:"the customer's id"`
}

// A short tool that is safe to repeat can run as a Temporal local
// activity, in the worker that handles the model's reply. A tool that is
// not idempotent never runs locally, whatever Local says.
func ExampleSpec_local() {
	lookup := func(ctx context.Context, call tool.Call, args lookupArgs) (results.Outcome, error) {
		return results.SucceedText("customer " + args.ID + ": Ada Lovelace"), nil
	}
	t := tool.MustFunc(tool.Spec{
		Name:        "lookup",
		Description: "Look a customer up by id.",
		Idempotent:  true, // required: a local run may run again after a crash
		Local:       true,
	}, lookup)
	fmt.Println(t.Spec().RunsLocally())

	notIdempotent := t.Spec()
	notIdempotent.Idempotent = false
	fmt.Println(notIdempotent.RunsLocally())
	// Output:
	// true
	// false
}

// A tool that needs a person returns an interrupt. The call waits; when
// the person answers, the tool runs again with the answer in call.Resume.
func ExampleCall_resume() {
	deploy := tool.MustFunc(tool.Spec{
		Name:        "deploy",
		Description: "Deploy the service to an environment.",
	}, func(ctx context.Context, call tool.Call, args struct{}) (results.Outcome, error) {
		if call.Resume == nil {
			return results.NeedChoice("Deploy where?",
				results.Option{ID: "staging"}, results.Option{ID: "production"}), nil
		}
		var env string
		if err := json.Unmarshal(call.Resume.Answer, &env); err != nil {
			return results.FailTool("the answer is not an environment: %v", err), nil
		}
		return results.SucceedText("deployed to " + env), nil
	})

	first, _ := deploy.Run(context.Background(), tool.Call{Arguments: json.RawMessage(`{}`)})
	fmt.Println(first.Kind, first.Interrupt.Prompt)

	again, _ := deploy.Run(context.Background(), tool.Call{
		Arguments: json.RawMessage(`{}`),
		Resume:    &tool.Resume{Decision: results.DecisionAnswer, Answer: json.RawMessage(`"staging"`), By: "ann"},
	})
	fmt.Println(again.Success.Parts[0].Text)
	// Output:
	// interrupt Deploy where?
	// deployed to staging
}

// Edited arguments and answers are checked against a tool's schema with
// the same compiled schema the workflow uses; the error names the field.
func ExampleRegistry_Schema() {
	registry, _ := tool.NewRegistry(Greet)
	schema, _ := registry.Schema("greet")
	fmt.Println(schema.Validate(json.RawMessage(`{"name":"Ada"}`)) == nil)
	fmt.Println(schema.Validate(json.RawMessage(`{"name":42}`)))
	// Output:
	// true
	// arguments do not match the schema: validating /properties/name: type: 42 has type "integer", want "string"
}
