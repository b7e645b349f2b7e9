//go:build unix

package builtin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities/tool"
	"github.com/tollgate-dev/tollgate/results"
)

func TestShell(t *testing.T) {
	ws, outside := newWorkspace(t)
	realWS, err := filepath.EvalSymlinks(ws)
	require.NoError(t, err)
	tools := testTools(t, Options{ShellTimeout: 2 * time.Second, MaxShellOutput: 1000})
	sh := tools[Shell]
	call := tool.Call{Workspace: ws}

	tests := []struct {
		name        string
		call        tool.Call
		command     string
		wantText    string
		wantErr     []string
		wantWorkDir string
		// partial: wantText is only a part of the text.
		partial bool
	}{
		{name: "stdout", command: "echo hello", wantText: "hello\n"},
		{name: "silent", command: "true", wantText: ""},
		{name: "stderr interleaved", command: "echo out; echo err >&2; echo out2", wantText: "out\nerr\nout2\n"},
		{name: "runs in workspace", command: "cat notes.txt | wc -l", wantText: "5\n"},
		{name: "exit status", command: "echo before; exit 3", wantErr: []string{"exit status 3", "before"}},
		{name: "failing command", command: "ls does-not-exist", wantErr: []string{"exit status 2", "does-not-exist"}},
		{name: "syntax error", command: "if then fi (", wantErr: []string{"exit status 2", "syntax error"}},
		{name: "killed by signal", command: "kill -9 $$", wantErr: []string{"killed by signal"}},
		{name: "cd inside", command: "mkdir -p a/b && cd a/b", wantWorkDir: filepath.Join(ws, "a", "b")},
		{name: "cd then exit", command: "cd sub; exit 0", wantWorkDir: filepath.Join(ws, "sub")},
		{name: "cd and back", command: "cd sub && cd ..", wantText: ""},
		{name: "failed command keeps workdir", command: "cd sub && false", wantErr: []string{"exit status 1"}},
		{
			name: "workdir", call: tool.Call{Workspace: ws, WorkDir: filepath.Join(ws, "sub")},
			command: "pwd -P; cat inner.txt", wantText: filepath.Join(realWS, "sub") + "\ninner\n",
		},
		{
			name: "back to the root", call: tool.Call{Workspace: ws, WorkDir: filepath.Join(ws, "sub")},
			command: "cd ..", wantWorkDir: ws,
		},
		{name: "cd outside is not adopted", command: "cd " + outside, wantText: "outside the workspace; the working directory stays .", partial: true},
		{name: "cd through link out is not adopted", command: "cd dir-out", wantText: "outside the workspace", partial: true},
		{
			name: "workdir outside", call: tool.Call{Workspace: ws, WorkDir: outside},
			command: "cat secret.txt", wantErr: []string{"outside the workspace"},
		},
		{
			name: "removed workdir falls back to root", call: tool.Call{Workspace: ws, WorkDir: filepath.Join(ws, "gone")},
			command: "ls notes.txt", wantText: "notes.txt\nnote: the working directory gone no longer exists; ran in the workspace root", wantWorkDir: ws,
		},
		{name: "timeout", command: "echo started; sleep 30", wantErr: []string{"timed out after 2s", "started"}},
		{name: "output cap", command: "head -c 5000 /dev/zero | tr '\\0' a; echo; echo END", wantText: "bytes of output dropped", partial: true},
		{name: "empty command", command: "  ", wantErr: []string{"command is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := call
			if tt.call.Workspace != "" {
				c = tt.call
			}
			start := time.Now()
			out := run(t, sh, c, shellArgs{Command: tt.command})
			require.Less(t, time.Since(start), 5*time.Second)
			if tt.wantErr != nil {
				requireToolError(t, out, tt.wantErr...)
				return
			}
			text := requireText(t, out)
			if tt.wantText == "" {
				require.Empty(t, out.Success.Parts, "text %q", text)
			} else if tt.partial {
				require.Contains(t, text, tt.wantText)
			} else {
				require.Equal(t, tt.wantText, text)
			}
			require.Equal(t, tt.wantWorkDir, out.Success.WorkDir)
		})
	}
}

func TestShellOutputCapKeepsHeadAndTail(t *testing.T) {
	ws, _ := newWorkspace(t)
	sh := testTools(t, Options{MaxShellOutput: 100})[Shell]
	out := run(t, sh, tool.Call{Workspace: ws}, shellArgs{Command: "echo START; seq 1 1000; echo END"})
	text := requireText(t, out)
	require.True(t, strings.HasPrefix(text, "START\n"), text)
	require.True(t, strings.HasSuffix(text, "END\n"), text)
	require.Contains(t, text, "bytes of output dropped")
	require.LessOrEqual(t, len(text), 200)
	var details struct {
		OutputBytes  int64 `json:"output_bytes"`
		DroppedBytes int64 `json:"dropped_bytes"`
	}
	require.NoError(t, json.Unmarshal(out.Success.Details, &details))
	require.Equal(t, details.OutputBytes-100, details.DroppedBytes)
}

func TestShellKillsBackgroundProcesses(t *testing.T) {
	ws, _ := newWorkspace(t)
	sh := testTools(t, Options{ShellTimeout: time.Second})[Shell]

	// A background process must neither hold the call open nor outlive it.
	start := time.Now()
	out := run(t, sh, tool.Call{Workspace: ws}, shellArgs{Command: "sleep 30 & echo $! > bg.pid; echo started"})
	require.Equal(t, "started\n", requireText(t, out))
	require.Less(t, time.Since(start), pipeDrainWait)
	requireGone(t, filepath.Join(ws, "bg.pid"))

	// On timeout the whole group goes, not just bash.
	out = run(t, sh, tool.Call{Workspace: ws}, shellArgs{Command: "sleep 30 & echo $! > bg2.pid; wait"})
	requireToolError(t, out, "timed out after 1s")
	requireGone(t, filepath.Join(ws, "bg2.pid"))
}

func requireGone(t *testing.T, pidFile string) {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		if syscall.Kill(pid, 0) != nil {
			return true
		}
		// Killed but not yet reaped by whoever adopted it.
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		return err == nil && strings.Contains(string(stat), ") Z ")
	}, 2*time.Second, 20*time.Millisecond, "process %d still running", pid)
}

func TestShellHidesSecrets(t *testing.T) {
	ws, _ := newWorkspace(t)
	t.Setenv("OPENAI_API_KEY", "sk-very-secret")
	t.Setenv("TEMPORAL_API_KEY", "temporal-secret")
	t.Setenv("MY_SERVICE_TOKEN", "token-secret")
	t.Setenv("TOLLGATE_PLAIN", "visible-only-with-prefix")
	t.Setenv("HARMLESS_SETTING", "visible")
	sh := testTools(t, Options{})[Shell]
	text := requireText(t, run(t, sh, tool.Call{Workspace: ws}, shellArgs{Command: "env"}))
	require.Contains(t, text, "HARMLESS_SETTING=visible")
	require.Contains(t, text, "TERM=dumb")
	for _, s := range []string{"sk-very-secret", "temporal-secret", "token-secret", "visible-only-with-prefix"} {
		require.NotContains(t, text, s)
	}
}

func TestShellCancelled(t *testing.T) {
	ws, _ := newWorkspace(t)
	sh := testTools(t, Options{})[Shell]
	ctx, cancel := contextWithCancelAfter(200 * time.Millisecond)
	defer cancel()
	raw, _ := json.Marshal(shellArgs{Command: "sleep 30"})
	start := time.Now()
	_, err := sh.Run(ctx, tool.Call{Workspace: ws, Arguments: raw})
	require.ErrorContains(t, err, "context canceled")
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestShellErrorOutputIsTruncated(t *testing.T) {
	ws, _ := newWorkspace(t)
	sh := testTools(t, Options{})[Shell]
	out := run(t, sh, tool.Call{Workspace: ws}, shellArgs{Command: "seq 1 100000; exit 1"})
	requireToolError(t, out, "exit status 1")
	require.LessOrEqual(t, len(out.ToolError.Message), tool.DefaultMaxOutputBytes)
	require.True(t, strings.HasSuffix(out.ToolError.Message, results.TruncatedMarker))
}
