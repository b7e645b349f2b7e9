// Package activities holds the Temporal activities of a turn: RunTool runs
// one tool call, CallModel asks the model for its next message,
// DescribeTools tells the workflow what the worker's tools are, and
// PreviewTool shows what a call waiting for approval would change.
//
// The tool SDK lives in tool, the built-in tools in
// activities/builtin, model providers under model, account
// connections in connections and the conversation store in
// storage/transcript.
package activities
