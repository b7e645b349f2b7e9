// Package activities holds the Temporal activities of a turn: RunTool runs
// one tool call, CallModel asks the model for its next message, and
// DescribeTools tells the workflow what the worker's tools are.
//
// The tool SDK lives in activities/tool, the built-in tools in
// activities/builtin, model providers under activities/model, account
// connections in activities/connections and the conversation store in
// activities/transcript.
package activities
