package mcp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A tool the server declares as runnable only as a task is not offered:
// every plain call of it would fail.
func TestTaskRequiredToolsAreNotOffered(t *testing.T) {
	f := openStdio(t, nil)
	for _, tl := range f.ts.Tools() {
		require.NotEqual(t, "t.long_job", tl.Spec().Name)
	}
	var reason string
	for _, s := range f.ts.Skipped() {
		if s.Tool == "long_job" {
			reason = s.Reason
		}
	}
	require.Contains(t, reason, `execution.taskSupport "required"`)
	require.NotNil(t, f.tool(t, "t.steps"), "other tools are offered")
}

// The tap finds the declaration in a line of JSON, in an SSE data line
// split across writes, and in a body without a final newline; "optional"
// task support leaves a tool offered.
func TestTaskTapReadsEveryFraming(t *testing.T) {
	tap := newTaskTap()
	_, _ = tap.Write([]byte(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a","execution":{"taskSupport":"required"}},{"name":"b","execution":{"taskSupport":"optional"}}]}}` + "\n"))
	_, _ = tap.Write([]byte(`event: message` + "\n" + `data: {"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"c","exec`))
	_, _ = tap.Write([]byte(`ution":{"taskSupport":"required"}}]}}` + "\n\n"))
	_, _ = tap.Write([]byte(`{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"d","execution":{"taskSupport":"required"}}]}}`))
	require.True(t, tap.requiresTasks("a"))
	require.False(t, tap.requiresTasks("b"))
	require.True(t, tap.requiresTasks("c"))
	require.True(t, tap.requiresTasks("d"))
	require.False(t, tap.requiresTasks("e"))
	var none *taskTap
	require.False(t, none.requiresTasks("a"))
}
