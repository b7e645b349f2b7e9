package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	tgmcp "github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/model/scripted"
)

func connect(t *testing.T, dir string, choose string) *mcp.ClientSession {
	t.Helper()
	n, err := open(dir, true)
	require.NoError(t, err)
	t.Cleanup(func() { n.root.Close() })
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := n.server().Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { ss.Close() })
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"action": choose}}, nil
		},
	})
	cs, err := c.Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

func TestNotesListAppendAndRenameWithAQuestion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "notes")
	cs := connect(t, dir, "keep_both")

	text, _ := callText(t, cs, "list", map[string]any{})
	require.Equal(t, "1 notes:\ntodo: - water the plants", text, "a new directory is seeded")
	text, _ = callText(t, cs, "append", map[string]any{"name": "ideas", "text": "- try MCP"})
	require.Equal(t, "Appended 10 bytes to ideas.", text)
	text, _ = callText(t, cs, "rename", map[string]any{"from": "ideas", "to": "todo"})
	require.Equal(t, "todo is taken; renamed ideas to todo-2.", text)
	b, err := os.ReadFile(filepath.Join(dir, "todo-2.md"))
	require.NoError(t, err)
	require.Equal(t, "- try MCP\n", string(b))

	text, isErr := callText(t, cs, "append", map[string]any{"name": "../escape", "text": "x"})
	require.True(t, isErr)
	require.Contains(t, text, "must be 1-64")
}

func TestNotesRenameMerges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "notes")
	cs := connect(t, dir, "merge")
	callText(t, cs, "append", map[string]any{"name": "ideas", "text": "- try MCP"})
	text, _ := callText(t, cs, "rename", map[string]any{"from": "ideas", "to": "todo"})
	require.Equal(t, "Merged ideas into todo.", text)
	b, err := os.ReadFile(filepath.Join(dir, "todo.md"))
	require.NoError(t, err)
	require.Equal(t, "- water the plants\n- try MCP\n", string(b))
}

// The demo files of docs/mcp.md are valid: the worker's MCP configuration and
// the scripted model's replies.
func TestDemoConfigAndScriptParse(t *testing.T) {
	cfg, err := tgmcp.LoadConfig("../mcp.json")
	require.NoError(t, err)
	require.Contains(t, cfg.Servers, "notes")
	b, err := os.ReadFile("../notes-demo.json")
	require.NoError(t, err)
	s, err := scripted.Parse("notes-demo.json", b)
	require.NoError(t, err)
	require.Len(t, s.Replies, 4)
}
