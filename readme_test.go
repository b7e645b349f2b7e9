package tollgate_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's worker snippet is the example's code, so it compiles and
// its tests run on every make test.
func TestReadmeWorkerSnippetIsTheExamplesCode(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	worker, err := os.ReadFile("examples/refunds/cmd/worker/main.go")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "## Use Tollgate in your own worker")
	require.True(t, ok, "README has the section")
	_, rest, ok := strings.Cut(section, "```go\n")
	require.True(t, ok)
	snippet, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	require.Contains(t, string(worker), strings.TrimSpace(snippet))
}
