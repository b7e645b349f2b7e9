package builtin

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// testTools builds the tools with opts, filling in a memory credential
// store, and indexes them by name.
func testTools(t *testing.T, opts Options) map[string]tool.Tool {
	t.Helper()
	if opts.Connections == nil {
		opts.Connections = connections.NewMemoryStore()
	}
	list, err := Tools(opts)
	require.NoError(t, err)
	byName := map[string]tool.Tool{}
	for _, tl := range list {
		byName[tl.Spec().Name] = tl
	}
	return byName
}

// run calls a tool the way RunTool does: arguments validated against the
// spec's schema first, then Run. The outcome must be well formed.
func run(t *testing.T, tl tool.Tool, call tool.Call, args any) results.Outcome {
	t.Helper()
	out, err := runErr(t, tl, call, args)
	require.NoError(t, err)
	return out
}

func runErr(t *testing.T, tl tool.Tool, call tool.Call, args any) (results.Outcome, error) {
	t.Helper()
	raw, err := json.Marshal(args)
	require.NoError(t, err)
	schema, err := tool.CompileSchema(tl.Spec().Schema)
	require.NoError(t, err)
	require.NoError(t, schema.Validate(raw), "arguments %s", raw)
	call.Arguments = raw
	out, err := tl.Run(context.Background(), call)
	if err == nil {
		require.NoError(t, out.Validate())
	}
	return out, err
}

func requireText(t *testing.T, out results.Outcome) string {
	t.Helper()
	require.Equal(t, results.KindSuccess, out.Kind, "outcome: %+v", out.ToolError)
	var text string
	for _, p := range out.Success.Parts {
		if p.Type == results.PartText {
			text += p.Text
		}
	}
	return text
}

func requireToolError(t *testing.T, out results.Outcome, contains ...string) {
	t.Helper()
	require.Equal(t, results.KindToolError, out.Kind, "outcome: %+v", out.Success)
	for _, c := range contains {
		require.Contains(t, out.ToolError.Message, c)
	}
}

// newWorkspace makes a workspace with a few files and, next to it, an
// outside directory that links from inside point to.
func newWorkspace(t *testing.T) (ws, outside string) {
	t.Helper()
	base := t.TempDir()
	ws = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{ws, outside, filepath.Join(ws, "sub")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	write := func(p, s string) { require.NoError(t, os.WriteFile(p, []byte(s), 0o644)) }
	write(filepath.Join(ws, "notes.txt"), "one\ntwo\nthree\nfour\nfive\n")
	write(filepath.Join(ws, "sub", "inner.txt"), "inner\n")
	write(filepath.Join(outside, "secret.txt"), "top secret\n")
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "link-out.txt")))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "dir-out")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "nothing-yet.txt"), filepath.Join(ws, "dangling-out.txt")))
	require.NoError(t, os.Symlink("notes.txt", filepath.Join(ws, "link-in.txt")))
	return ws, outside
}

func TestToolsSpecs(t *testing.T) {
	tools := testTools(t, Options{})
	reg, err := tool.NewRegistry(func() []tool.Tool {
		var l []tool.Tool
		for _, tl := range tools {
			l = append(l, tl)
		}
		return l
	}()...)
	require.NoError(t, err)
	require.Equal(t, []string{AskUser, EditFile, Handoff, HTTPFetch, ListDir, ListIssues, ReadFile, Shell, WriteFile}, reg.Names())

	type policy struct {
		approval               tool.Approval
		idempotent, concurrent bool
	}
	want := map[string]policy{
		ReadFile:   {tool.ApprovalNever, true, true},
		ListDir:    {tool.ApprovalNever, true, true},
		WriteFile:  {tool.ApprovalAlways, true, false},
		EditFile:   {tool.ApprovalAlways, false, false},
		Shell:      {tool.ApprovalAlways, false, false},
		HTTPFetch:  {tool.ApprovalNever, true, true},
		AskUser:    {tool.ApprovalNever, true, true},
		ListIssues: {tool.ApprovalNever, true, true},
		Handoff:    {tool.ApprovalNever, true, false},
	}
	for name, p := range want {
		s := tools[name].Spec()
		require.Equal(t, p, policy{s.Approval, s.Idempotent, s.Concurrent}, name)
	}
	require.Greater(t, tools[Shell].Spec().Timeout, DefaultShellTimeout, "the activity must outlast the shell's own timeout")
}

func TestToolsRequiresConnections(t *testing.T) {
	_, err := Tools(Options{HTTPClient: http.DefaultClient})
	require.ErrorContains(t, err, "Connections")
}

func TestMissingWorkspaceIsInternal(t *testing.T) {
	tools := testTools(t, Options{})
	_, err := runErr(t, tools[ReadFile], tool.Call{}, readFileArgs{Path: "x"})
	require.ErrorContains(t, err, "no workspace")
}

func contextWithCancelAfter(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(d, cancel)
	return ctx, cancel
}
