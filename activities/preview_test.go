package activities

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities/builtin"
	conns "github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// previewTool runs PreviewTool through the test environment, so the
// result also survives the data converter.
func previewTool(t *testing.T, acts *Activities, in PreviewToolInput) PreviewToolResult {
	t.Helper()
	if in.TurnID == "" {
		in.TurnID = "turn-1"
	}
	if in.CallID == "" {
		in.CallID = "call-1"
	}
	val, err := newEnv(acts).ExecuteActivity(acts.PreviewTool, in)
	require.NoError(t, err, "PreviewTool never fails")
	var res PreviewToolResult
	require.NoError(t, val.Get(&res))
	require.LessOrEqual(t, len(res.Reason), results.MaxPreviewNote)
	// Whatever it returns must fit on a card.
	card := results.Card{CallID: in.CallID, Tool: in.Tool, State: results.StatePendingApproval, Preview: res.Diffs, PreviewNote: res.Reason}
	require.NoError(t, card.Validate())
	return res
}

func args(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// builtinActivities serves the built-in tools from a workspace holding
// notes.txt and sub/, beside an outside directory holding a secret that
// ws/link-out.txt points to.
func builtinActivities(t *testing.T) (acts *Activities, outside string) {
	t.Helper()
	tools, err := builtin.Tools(builtin.Options{Connections: conns.NewMemoryStore()})
	require.NoError(t, err)
	acts = newActivities(t, tools...)
	outside = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("top secret\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(acts.Workspace, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(acts.Workspace, "notes.txt"), []byte("one\ntwo\nthree\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(acts.Workspace, "link-out.txt")))
	return acts, outside
}

func TestPreviewToolBuiltins(t *testing.T) {
	acts, outside := builtinActivities(t)
	notes := filepath.Join(acts.Workspace, "notes.txt")

	specs, err := describe(t, acts, []string{builtin.WriteFile, builtin.EditFile, builtin.Shell})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, false}, []bool{specs[0].Previews, specs[1].Previews, specs[2].Previews},
		"the workflow sees from the recorded specs which tools preview")

	tests := []struct {
		name       string
		in         PreviewToolInput
		wantDiffs  []results.FileDiff
		wantReason string
	}{
		{"new file", PreviewToolInput{Tool: builtin.WriteFile, Arguments: args(t, map[string]string{"path": "new/a.txt", "content": "a\n"})},
			[]results.FileDiff{{Path: "new/a.txt", Diff: "--- /dev/null\n+++ b/new/a.txt\n@@ -0,0 +1 @@\n+a\n"}}, ""},
		{"changed file", PreviewToolInput{Tool: builtin.WriteFile, Arguments: args(t, map[string]string{"path": "notes.txt", "content": "one\n2\nthree\n"})},
			[]results.FileDiff{{Path: "notes.txt", Diff: "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"}}, ""},
		{"edit", PreviewToolInput{Tool: builtin.EditFile, Arguments: args(t, map[string]string{"path": "notes.txt", "old_string": "three", "new_string": "3"})},
			[]results.FileDiff{{Path: "notes.txt", Diff: "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n two\n-three\n+3\n"}}, ""},
		{"relative to the working directory", PreviewToolInput{Tool: builtin.WriteFile, WorkDir: "sub", Arguments: args(t, map[string]string{"path": "b.txt", "content": "b\n"})},
			[]results.FileDiff{{Path: "sub/b.txt", Diff: "--- /dev/null\n+++ b/sub/b.txt\n@@ -0,0 +1 @@\n+b\n"}}, ""},
		{"edit with no match", PreviewToolInput{Tool: builtin.EditFile, Arguments: args(t, map[string]string{"path": "notes.txt", "old_string": "four", "new_string": "4"})},
			nil, "edit_file would fail: old_string was not found in notes.txt; read the file and copy the text exactly"},
		{"same content", PreviewToolInput{Tool: builtin.WriteFile, Arguments: args(t, map[string]string{"path": "notes.txt", "content": "one\ntwo\nthree\n"})},
			nil, "write_file would change nothing"},
		{"dotdot escape", PreviewToolInput{Tool: builtin.WriteFile, Arguments: args(t, map[string]string{"path": "../x/secret.txt", "content": "x"})},
			nil, `write_file would fail: path "../x/secret.txt" is outside the workspace`},
		{"symlink escape", PreviewToolInput{Tool: builtin.EditFile, Arguments: args(t, map[string]string{"path": "link-out.txt", "old_string": "top secret", "new_string": "x"})},
			nil, `edit_file would fail: path "link-out.txt" leads outside the workspace through a symbolic link`},
		{"working directory outside", PreviewToolInput{Tool: builtin.WriteFile, WorkDir: "../elsewhere", Arguments: args(t, map[string]string{"path": "a", "content": "x"})},
			nil, "write_file would fail: working directory"},
		{"arguments the schema refuses", PreviewToolInput{Tool: builtin.EditFile, Arguments: json.RawMessage(`{"path":"notes.txt"}`)},
			nil, "edit_file would fail: invalid arguments for edit_file: "},
		{"tool that cannot preview", PreviewToolInput{Tool: builtin.Shell, Arguments: json.RawMessage(`{"command":"rm -rf /"}`)},
			nil, "no preview: shell cannot show what a call would change"},
		{"unknown tool", PreviewToolInput{Tool: "teleport", Arguments: json.RawMessage(`{}`)},
			nil, "no preview: this worker has no tool teleport"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := previewTool(t, acts, tt.in)
			require.Equal(t, tt.wantDiffs, res.Diffs)
			if tt.wantReason == "" {
				require.Empty(t, res.Reason)
			} else {
				require.True(t, strings.HasPrefix(res.Reason, tt.wantReason), "reason %q", res.Reason)
			}
			require.NotContains(t, res.Reason, "top secret")
			require.NotContains(t, res.Reason, outside)
			require.NotContains(t, res.Reason, acts.Workspace)
		})
	}

	// Nothing was written: not the new files, not the edits.
	data, err := os.ReadFile(notes)
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\nthree\n", string(data))
	entries, err := os.ReadDir(acts.Workspace)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"link-out.txt", "notes.txt", "sub"}, names)
	data, err = os.ReadFile(filepath.Join(outside, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, "top secret\n", string(data))
}

func TestPreviewToolBoundsHugePreviews(t *testing.T) {
	acts, _ := builtinActivities(t)
	// Under the tool's 1 MiB file bound, but its diff is far over the
	// card's: the activity cuts it.
	big := strings.Repeat("a line of new text\n", 40_000)
	res := previewTool(t, acts, PreviewToolInput{Tool: builtin.WriteFile, Arguments: args(t, map[string]string{"path": "big.txt", "content": big})})
	require.Len(t, res.Diffs, 1)
	require.LessOrEqual(t, len(res.Diffs[0].Path)+len(res.Diffs[0].Diff), results.MaxPreviewBytes)
	require.True(t, strings.HasSuffix(res.Diffs[0].Diff, results.TruncatedMarker))
	require.True(t, strings.HasPrefix(res.Diffs[0].Diff, "--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,40000 @@\n+a line of new text\n"))

	// Over it, the tool says so instead of diffing.
	require.NoError(t, os.WriteFile(filepath.Join(acts.Workspace, "huge.txt"), []byte(strings.Repeat("x", 2<<20)), 0o644))
	res = previewTool(t, acts, PreviewToolInput{Tool: builtin.EditFile, Arguments: args(t, map[string]string{"path": "huge.txt", "old_string": "x", "new_string": "y"})})
	require.Equal(t, []results.FileDiff{{Path: "huge.txt", Diff: "huge.txt is 2097152 bytes, more than the 1048576 bytes a preview diffs; the change is not shown\n"}}, res.Diffs)
}

// previewFake is a tool whose preview a test sets.
type previewFake struct {
	*fakeTool
	preview func(ctx context.Context, call tool.Call) ([]results.FileDiff, error)
}

func (p previewFake) Preview(ctx context.Context, call tool.Call) ([]results.FileDiff, error) {
	return p.preview(ctx, call)
}

func newPreviewFake(name string, preview func(ctx context.Context, call tool.Call) ([]results.FileDiff, error)) previewFake {
	return previewFake{fakeTool: returns(name, results.Succeed(), nil), preview: preview}
}

func TestPreviewToolFailuresAreNotTheCalls(t *testing.T) {
	const secret = "pq: password authentication failed for user app at 10.0.0.5"
	var sawCall tool.Call
	tools := []tool.Tool{
		newPreviewFake("errs", func(context.Context, tool.Call) ([]results.FileDiff, error) { return nil, errors.New(secret) }),
		newPreviewFake("panics", func(context.Context, tool.Call) ([]results.FileDiff, error) { panic(secret) }),
		newPreviewFake("no_path", func(context.Context, tool.Call) ([]results.FileDiff, error) {
			return []results.FileDiff{{Diff: "+x\n"}}, nil
		}),
		newPreviewFake("records", func(_ context.Context, call tool.Call) ([]results.FileDiff, error) {
			sawCall = call
			return []results.FileDiff{{Path: "p", Diff: "+x\n"}}, nil
		}),
	}
	acts := newActivities(t, tools...)

	for _, name := range []string{"errs", "panics", "no_path"} {
		t.Run(name, func(t *testing.T) {
			res := previewTool(t, acts, PreviewToolInput{Tool: name, Arguments: json.RawMessage(`{}`)})
			require.Empty(t, res.Diffs)
			require.Equal(t, "no preview: it failed (ref turn-1/call-1/preview)", res.Reason)
		})
	}

	t.Run("the call is the run's", func(t *testing.T) {
		require.NoError(t, os.Mkdir(filepath.Join(acts.Workspace, "d"), 0o755))
		res := previewTool(t, acts, PreviewToolInput{TurnID: "tu", CallID: "ca", Tool: "records", Arguments: json.RawMessage(`{"a":1}`), WorkDir: "d", User: "ada"})
		require.Equal(t, []results.FileDiff{{Path: "p", Diff: "+x\n"}}, res.Diffs)
		require.Equal(t, tool.Call{TurnID: "tu", CallID: "ca", Arguments: json.RawMessage(`{"a":1}`),
			Workspace: acts.Workspace, WorkDir: filepath.Join(acts.Workspace, "d"), User: "ada"}, sawCall)
	})
}

func TestPreviewToolSlowPreview(t *testing.T) {
	old := previewTimeout
	previewTimeout = 200 * time.Millisecond
	t.Cleanup(func() { previewTimeout = old })

	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	acts := newActivities(t,
		// Ignores its context: the activity must not wait for it.
		newPreviewFake("stubborn", func(context.Context, tool.Call) ([]results.FileDiff, error) {
			<-release
			return nil, nil
		}),
		// Gives up when its context ends, with an error of its own.
		newPreviewFake("polite", func(ctx context.Context, _ tool.Call) ([]results.FileDiff, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}),
	)
	for _, name := range []string{"stubborn", "polite"} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			res := previewTool(t, acts, PreviewToolInput{Tool: name, Arguments: json.RawMessage(`{}`)})
			took := time.Since(start)
			require.Equal(t, "no preview: it took longer than 200ms", res.Reason)
			require.Less(t, took, 2*time.Second)
			t.Logf("%s: answered after %s", name, took)
		})
	}
}

func TestPreviewToolCancelled(t *testing.T) {
	// The workflow cancels the preview when the call was decided first.
	acts := newActivities(t, newPreviewFake("waits", func(ctx context.Context, _ tool.Call) ([]results.FileDiff, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := acts.preview(ctx, PreviewToolInput{Tool: "waits", Arguments: json.RawMessage(`{}`)}, "ref")
	require.Equal(t, "no preview: it was cancelled", res.Reason)
}

func TestPreviewToolReasonBounded(t *testing.T) {
	long := strings.Repeat("é", results.MaxPreviewNote)
	acts := newActivities(t, newPreviewFake("wordy", func(context.Context, tool.Call) ([]results.FileDiff, error) {
		return nil, tool.WouldFail("%s", long)
	}))
	res := previewTool(t, acts, PreviewToolInput{Tool: "wordy", Arguments: json.RawMessage(`{}`)})
	require.True(t, strings.HasPrefix(res.Reason, "wordy would fail: é"))
	require.True(t, strings.HasSuffix(res.Reason, results.TruncatedMarker))
}

func TestPreviewToolName(t *testing.T) {
	// The constant the workflow schedules by is the name RegisterActivity
	// derives from the method.
	acts := newActivities(t)
	env := newEnv(acts)
	val, err := env.ExecuteActivity(PreviewToolName, PreviewToolInput{Tool: "x", Arguments: json.RawMessage(`{}`)})
	require.NoError(t, err)
	var res PreviewToolResult
	require.NoError(t, val.Get(&res))
	require.Equal(t, "no preview: this worker has no tool x", res.Reason)
}
