//go:build unix

package builtin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/proctest"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

func TestShell(t *testing.T) {
	forEachContainment(t, testShell)
}

func testShell(t *testing.T, cont containment) {
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
			switch {
			case tt.partial:
				require.Contains(t, text, tt.wantText)
			case cont == containProcessGroup:
				require.Equal(t, withEscapeNote(tt.wantText), text)
			case tt.wantText == "":
				require.Empty(t, out.Success.Parts, "text %q", text)
			default:
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
	forEachContainment(t, testShellKillsBackgroundProcesses)
}

func testShellKillsBackgroundProcesses(t *testing.T, c containment) {
	ws, _ := newWorkspace(t)
	sh := testTools(t, Options{ShellTimeout: time.Second})[Shell]

	// A background process must neither hold the call open nor outlive it.
	start := time.Now()
	out := run(t, sh, tool.Call{Workspace: ws}, shellArgs{Command: "sleep 30 & echo $! > bg.pid; echo started"})
	want := "started\n"
	if c == containProcessGroup {
		want = withEscapeNote(want)
	}
	require.Equal(t, want, requireText(t, out))
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

func TestShellEnvironmentIsAllowlisted(t *testing.T) {
	ws, _ := newWorkspace(t)
	secrets := map[string]string{
		"DATABASE_URL":     "postgres://app:db-secret@db/app",
		"PGPASS":           "pg-secret",
		"SENTRY_DSN":       "https://sentry-secret@sentry.example/1",
		"OPENAI_API_KEY":   "sk-very-secret",
		"TEMPORAL_API_KEY": "temporal-secret",
		"HARMLESS_SETTING": "not-named-by-the-operator",
		"BASH_ENV":         "/tmp/would-run-first",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("EXTRA_ALLOWED", "extra-visible")
	t.Setenv("MYTOOL_HOME", "prefix-visible")
	t.Setenv("LC_ALL", "C")
	t.Setenv("TERM", "xterm-256color")
	sh := testTools(t, Options{ShellEnv: []string{"EXTRA_ALLOWED", "MYTOOL_*"}})[Shell]

	// In the worker bash's parent is the worker; here it is this test
	// process. Its /proc environ is the environment it was started with,
	// so t.Setenv values never show there: the worker's own protection
	// (non-dumpable) is tested in package worker.
	text := requireText(t, run(t, sh, tool.Call{Workspace: ws}, shellArgs{
		Command: "env; echo PPID=$PPID; cat /proc/$PPID/environ 2>&1 | tr '\\0' '\\n'; true",
	}))
	env, parentEnv, ok := strings.Cut(text, "PPID="+strconv.Itoa(os.Getpid())+"\n")
	require.True(t, ok, text)
	for _, want := range []string{"EXTRA_ALLOWED=extra-visible\n", "MYTOOL_HOME=prefix-visible\n", "LC_ALL=C\n", "TERM=dumb\n", "PAGER=cat\n", "PATH=" + os.Getenv("PATH") + "\n"} {
		require.Contains(t, env, want)
	}
	require.NotContains(t, env, "TERM=xterm")
	for k, v := range secrets {
		require.NotContains(t, env, k+"=", k)
		require.NotContains(t, env, v, k)
		require.NotContains(t, parentEnv, v, k)
	}
}

func TestParseShellEnv(t *testing.T) {
	require.Equal(t, []string{"GOPATH", "GOCACHE", "MY_*"}, ParseShellEnv(" GOPATH, GOCACHE ,,MY_* "))
	require.Empty(t, ParseShellEnv(""))
}

func TestShellKillsDetachedProcesses(t *testing.T) {
	forEachContainment(t, func(t *testing.T, c containment) {
		ws, _ := newWorkspace(t)
		sh := testTools(t, Options{ShellTimeout: 3 * time.Second})[Shell]
		for _, end := range []string{"echo started", "echo started; sleep 30"} {
			marker := fmt.Sprintf("tollgate-escape-%d-%s-%d", os.Getpid(), c, len(end))
			t.Cleanup(func() { proctest.KillMarked(marker) })
			// Three ways out of bash's process group, each renamed with
			// exec -a so that only the escaped sleep carries the marker;
			// the command waits until all three run.
			command := fmt.Sprintf(`started() { for ((i = 0; i < 200; i++)); do for f in /proc/[0-9]*/cmdline; do IFS= read -r -d '' a0 2>/dev/null <"$f" && [[ $a0 == "$1" ]] && return 0; done; sleep 0.05; done; return 1; }
setsid -f bash -c 'exec -a %[1]s-setsid sleep 1000'
(setsid bash -c 'exec -a %[1]s-subshell sleep 1000' &)
(set -m; (bash -c 'exec -a %[1]s-doublefork sleep 1000' &) &)
started %[1]s-setsid && started %[1]s-subshell && started %[1]s-doublefork || exit 9
%[2]s`, marker, end)
			start := time.Now()
			out := run(t, sh, tool.Call{Workspace: ws}, shellArgs{Command: command})
			elapsed := time.Since(start)
			if end == "echo started" {
				text := requireText(t, out)
				require.True(t, strings.HasPrefix(text, "started\n"), text)
			} else {
				requireToolError(t, out, "timed out after 3s", "started")
			}
			if c == containProcessGroup {
				// The control: these do escape a process group, and the
				// model is told they may.
				require.Len(t, proctest.Marked(marker), 3, "the escapes did not work; the test proves nothing")
				requireOutcomeContains(t, out, escapeNote)
				continue
			}
			require.Less(t, elapsed, 3*time.Second+pipeDrainWait, "a killed process must not hold the output pipe open")
			require.Eventually(t, func() bool { return len(proctest.Marked(marker)) == 0 }, 3*time.Second, 20*time.Millisecond,
				"processes outlived the call: %v", proctest.Marked(marker))
			time.Sleep(200 * time.Millisecond)
			require.Empty(t, proctest.Marked(marker))
			requireOutcomeNotContains(t, out, escapeNote)
		}
	})
}

func TestShellDescriptionMatchesContainment(t *testing.T) {
	forEachContainment(t, func(t *testing.T, c containment) {
		desc := testTools(t, Options{})[Shell].Spec().Description
		require.Contains(t, desc, containmentDescription(c))
		if c == containProcessGroup {
			require.Contains(t, desc, "may keep running")
		} else {
			require.Contains(t, desc, "every process it started is killed")
		}
	})
}

// forEachContainment runs test once for each containment, pinned, that
// this machine allows; the others are skipped with the reason.
func forEachContainment(t *testing.T, test func(t *testing.T, c containment)) {
	t.Logf("this worker would use %s", bestContainment())
	for c := containCgroup; c <= containProcessGroup; c++ {
		t.Run(c.String(), func(t *testing.T) {
			if err := probeJail(c); err != nil {
				t.Skipf("not available here: %v", err)
			}
			orig := shellContainment
			shellContainment = func() containment { return c }
			t.Cleanup(func() { shellContainment = orig })
			test(t, c)
		})
	}
}

// withEscapeNote is want as a process-group-only worker reports it.
func withEscapeNote(want string) string {
	if want == "" {
		return escapeNote
	}
	return strings.TrimSuffix(want, "\n") + "\n" + escapeNote
}

func requireOutcomeContains(t *testing.T, out results.Outcome, s string) {
	t.Helper()
	if out.Kind == results.KindToolError {
		require.Contains(t, out.ToolError.Message, s)
		return
	}
	require.Contains(t, requireText(t, out), s)
}

func requireOutcomeNotContains(t *testing.T, out results.Outcome, s string) {
	t.Helper()
	if out.Kind == results.KindToolError {
		require.NotContains(t, out.ToolError.Message, s)
		return
	}
	require.NotContains(t, requireText(t, out), s)
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
