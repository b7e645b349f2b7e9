package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/jail"
	"github.com/tollgate-dev/tollgate/internal/proctest"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// stdioFixture is the test binary configured as a stdio server "t".
type stdioFixture struct {
	ts      *Toolset
	log     string
	states  string
	environ []string
}

func openStdio(t testing.TB, mutate func(*Server)) *stdioFixture {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	f := &stdioFixture{log: filepath.Join(dir, "log"), states: filepath.Join(dir, "states")}
	f.environ = append(os.Environ(), serverEnvVar+"=stdio", "MCP_TEST_LOG="+f.log, "SECRET_MODEL_KEY=sk-do-not-pass")
	srv := Server{Command: exe, Env: []string{serverEnvVar, "MCP_TEST_*"}}
	if mutate != nil {
		mutate(&srv)
	}
	ts, err := Open(context.Background(), Config{Servers: map[string]Server{"t": srv}}, Options{
		StateDir: f.states,
		Environ:  func() []string { return f.environ },
	})
	require.NoError(t, err)
	t.Cleanup(ts.Close)
	f.ts = ts
	return f
}

func (f *stdioFixture) tool(t testing.TB, name string) tool.Tool {
	t.Helper()
	for _, tl := range f.ts.Tools() {
		if tl.Spec().Name == name {
			return tl
		}
	}
	require.Failf(t, "no tool", "%s is not among the tools", name)
	return nil
}

func (f *stdioFixture) logLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(f.log)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func run(t *testing.T, tl tool.Tool, call tool.Call) results.Outcome {
	t.Helper()
	if call.TurnID == "" {
		call.TurnID = "turn-1"
	}
	if call.CallID == "" {
		call.CallID = "call-1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := tl.Run(ctx, call)
	require.NoError(t, err)
	require.NoError(t, out.Validate())
	return out
}

func answer(v string) *tool.Resume {
	return &tool.Resume{Decision: results.DecisionAnswer, Answer: json.RawMessage(v), By: "ada"}
}

func TestOpenOffersToolsWithTheirPolicies(t *testing.T) {
	f := openStdio(t, func(s *Server) {
		s.Tools = map[string]Override{"write": {Approval: "never"}}
	})
	specs := map[string]tool.Spec{}
	for _, tl := range f.ts.Tools() {
		specs[tl.Spec().Name] = tl.Spec()
	}
	require.Contains(t, specs, "t.read")
	require.Equal(t, tool.ApprovalNever, specs["t.read"].Approval)
	require.True(t, specs["t.read"].Idempotent)
	require.True(t, specs["t.read"].Concurrent)
	require.Equal(t, "Read everything.", specs["t.read"].Description)

	require.Equal(t, tool.ApprovalAlways, specs["t.ask"].Approval, "destructive")
	require.False(t, specs["t.ask"].Idempotent)
	require.Equal(t, tool.ApprovalAlways, specs["t.upsert"].Approval, "additive is still a change")
	require.True(t, specs["t.upsert"].Idempotent)
	require.Equal(t, tool.ApprovalNever, specs["t.write"].Approval, "the operator's override wins")
	require.False(t, specs["t.write"].Concurrent)

	var schema map[string]any
	require.NoError(t, json.Unmarshal(specs["t.write"].Schema, &schema))
	require.Equal(t, "object", schema["type"])
	require.Contains(t, schema["properties"], "name")

	wordy := specs["t.wordy"].Description
	require.LessOrEqual(t, len(wordy), maxDescriptionBytes+len("\n[truncated]"))
	require.NotContains(t, wordy, "\x1b", "control characters are dropped")

	skipped := map[string]string{}
	for _, s := range f.ts.Skipped() {
		skipped[s.Tool] = s.Reason
	}
	require.Contains(t, skipped["remote_ref"], "schema", "a schema that does not compile drops its tool")
	require.Contains(t, skipped["sl/ash"], "name")
	require.NotContains(t, specs, "t.remote_ref")
}

func TestOverridesAllowlistAndTypos(t *testing.T) {
	f := openStdio(t, func(s *Server) {
		s.Tools = map[string]Override{"*": {Disabled: true}, "read": {}, "fail": {Approval: "always"}}
	})
	var names []string
	for _, tl := range f.ts.Tools() {
		names = append(names, tl.Spec().Name)
	}
	require.Equal(t, []string{"t.fail", "t.read"}, names)
	require.Equal(t, tool.ApprovalAlways, f.tool(t, "t.fail").Spec().Approval)

	exe, err := os.Executable()
	require.NoError(t, err)
	_, err = Open(context.Background(), Config{Servers: map[string]Server{"t": {
		Command: exe, Env: []string{serverEnvVar}, Tools: map[string]Override{"delete_fle": {Approval: "always"}},
	}}}, Options{Environ: func() []string { return append(os.Environ(), serverEnvVar+"=stdio") }})
	require.ErrorContains(t, err, `overrides tool "delete_fle", which the server does not list`)
}

func TestOpenFailsForAServerThatDoesNotStart(t *testing.T) {
	_, err := Open(context.Background(), Config{Servers: map[string]Server{"gone": {Command: filepath.Join(t.TempDir(), "no-such-server")}}}, Options{})
	require.ErrorContains(t, err, "mcp server gone")
}

func TestContentBlocksBecomeTypedResults(t *testing.T) {
	f := openStdio(t, nil)
	out := run(t, f.tool(t, "t.read"), tool.Call{})
	require.Equal(t, results.KindSuccess, out.Kind)
	s := out.Success
	require.Equal(t, []results.Part{
		results.TextPart("hello"),
		results.MediaPart("image/png", []byte("\x89PNG")),
		results.MediaPart("audio/wav", []byte("RIFF")),
		results.TextPart(`[resource link "Note A": file:///notes/a.md]`),
		results.TextPart("# B"),
		results.MediaPart("application/pdf", []byte("%PDF")),
	}, s.Parts, "a link that is not http(s) is text for the model, not a source")
	require.Empty(t, s.Sources, "sources are http(s) only")
	require.JSONEq(t, `{"count":3}`, string(s.Details))

	out = run(t, f.tool(t, "t.structured"), tool.Call{})
	require.Equal(t, []results.Part{results.JSONPart(json.RawMessage(`{"n":1}`))}, out.Success.Parts, "structured content alone reaches the model")
	require.JSONEq(t, `{"n":1}`, string(out.Success.Details))

	out = run(t, f.tool(t, "t.fail"), tool.Call{})
	require.Equal(t, results.KindToolError, out.Kind)
	require.Equal(t, "no such note", out.ToolError.Message)
}

// Sources are links people may open: a resource link or an embedded
// resource naming anything but an http(s) URL (javascript:, data:, no
// scheme) is never one.
func TestResourceLinksBecomeSourcesOnlyWhenHTTP(t *testing.T) {
	f := openStdio(t, nil)
	out := run(t, f.tool(t, "t.links"), tool.Call{})
	require.Equal(t, results.KindSuccess, out.Kind, "%+v", out)
	require.Equal(t, []results.Source{
		{URL: "https://docs.example.com/a", Title: "Doc A"},
		{URL: "http://docs.example.com/b"},
	}, out.Success.Sources)
	var texts []string
	for _, p := range out.Success.Parts {
		texts = append(texts, p.Text)
	}
	require.Contains(t, texts, `[resource link "click me": javascript:alert(document.cookie)]`, "the model still hears of it, as text")
	require.Contains(t, texts, "embedded")
}

func TestStdioServerSeesOnlyTheAllowlistedEnvironment(t *testing.T) {
	f := openStdio(t, nil)
	out := run(t, f.tool(t, "t.env"), tool.Call{})
	names := strings.Split(out.Success.Parts[0].Text, "\n")
	require.Contains(t, names, serverEnvVar)
	require.Contains(t, names, "MCP_TEST_LOG", "NAME_* matches a prefix")
	require.NotContains(t, names, "SECRET_MODEL_KEY")
	for _, n := range names {
		require.NotEmpty(t, tool.AllowedEnv([]string{n + "=x"}, baseEnv, []string{serverEnvVar, "MCP_TEST_*"}), "%s passed", n)
	}
}

func TestProtocolAndTransportFailuresAreInternal(t *testing.T) {
	f := openStdio(t, func(s *Server) { s.MaxResultBytes = 64 << 10 })
	ctx := context.Background()
	_, err := f.tool(t, "t.crash").Run(ctx, tool.Call{TurnID: "x", CallID: "crash", Arguments: json.RawMessage(`{}`)})
	require.Error(t, err, "a server that died is an internal error, never a result for the model")
	require.True(t, tool.IsRetryable(err), "an idempotent tool is retried after a lost session")

	out := run(t, f.tool(t, "t.big"), tool.Call{})
	require.Equal(t, results.KindToolError, out.Kind)
	require.Contains(t, out.ToolError.Message, "larger than 65536 bytes")

	// A tool the server stopped listing since the worker started.
	gone := *f.tool(t, "t.write").(*mcpTool)
	gone.mcpName = "gone"
	_, err = gone.Run(ctx, tool.Call{TurnID: "x", CallID: "gone", Arguments: json.RawMessage(`{}`)})
	require.Error(t, err, "the server's protocol error is internal")
	require.False(t, tool.IsRetryable(err))
}

func TestCancellingACallKillsTheServersProcessGroup(t *testing.T) {
	// The server reports pids as its PID namespace numbers them; in a
	// namespace of its own they would name other processes here.
	if k := jail.Best(); k == jail.PIDNamespace || k == jail.UserPIDNamespace {
		orig := containment
		containment = func() jail.Kind { return jail.ProcessGroup }
		t.Cleanup(func() { containment = orig })
	}
	f := openStdio(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.tool(t, "t.sleep").Run(ctx, tool.Call{TurnID: "x", CallID: "sleep", Arguments: json.RawMessage(`{}`)})
		done <- err
	}()
	var pids []int
	require.Eventually(t, func() bool {
		for _, l := range f.logLines(t) {
			if rest, ok := strings.CutPrefix(l, "pids "); ok {
				for _, p := range strings.Fields(rest) {
					n, _ := strconv.Atoi(p)
					pids = append(pids, n)
				}
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	for _, pid := range pids {
		require.Eventually(t, func() bool { return !proctest.Alive(pid) }, 5*time.Second, 20*time.Millisecond, "process %d outlived the call", pid)
	}
}

// alive reports whether pid runs (a zombie, reaped by nobody in the test,

// A stdio server's child that detaches (setsid: a new session and process
// group) dies with the call, under every containment this machine
// allows; with a process group only (the control) it escapes, and the
// worker said so at start.
func TestStdioServersDetachedChildDiesWithTheCall(t *testing.T) {
	t.Logf("this worker would use %s", jail.Best())
	for k := jail.Cgroup; k <= jail.ProcessGroup; k++ {
		t.Run(k.String(), func(t *testing.T) {
			if err := jail.Probe(k); err != nil {
				t.Skipf("not available here: %v", err)
			}
			orig := containment
			containment = func() jail.Kind { return k }
			t.Cleanup(func() { containment = orig })

			f := openStdio(t, nil)
			marker := fmt.Sprintf("tollgate-mcp-escape-%d-%s", os.Getpid(), k)
			t.Cleanup(func() { proctest.KillMarked(marker) })
			out := run(t, f.tool(t, "t.detach"), tool.Call{Arguments: json.RawMessage(`{"name":"` + marker + `"}`)})
			require.Equal(t, results.KindSuccess, out.Kind, "%+v %+v", out, out.ToolError)
			require.Contains(t, f.logLines(t), "detached "+marker, "the child ran; the test proves something")
			if k == jail.ProcessGroup {
				require.Len(t, proctest.Marked(marker), 1, "the escape did not work; the test proves nothing")
				return
			}
			require.Eventually(t, func() bool { return len(proctest.Marked(marker)) == 0 }, 5*time.Second, 20*time.Millisecond,
				"a detached child of the server outlived the call: %v", proctest.Marked(marker))
		})
	}
}

// Open says how stdio servers are contained, and warns when it is only
// their process groups.
func TestOpenLogsHowStdioServersAreContained(t *testing.T) {
	for _, k := range []jail.Kind{jail.Best(), jail.ProcessGroup} {
		orig := containment
		containment = func() jail.Kind { return k }
		var logs bytes.Buffer
		logContainment(Config{Servers: map[string]Server{"t": {Command: "x"}, "web": {URL: "https://mcp.example"}}}, slog.New(slog.NewTextHandler(&logs, nil)))
		containment = orig
		if k == jail.ProcessGroup {
			require.Contains(t, logs.String(), "level=WARN")
			require.Contains(t, logs.String(), "cannot contain")
		} else {
			require.Contains(t, logs.String(), "containment="+k.String())
		}
		require.Contains(t, logs.String(), "mcp_servers=t\n", "only stdio servers are named")
	}
}

// listed lists the processes in /proc whose argv[0] starts with marker.
