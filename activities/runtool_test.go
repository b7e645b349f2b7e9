package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

type copyArgs struct {
	Path  string `json:"path" jsonschema:"the file to copy"`
	Count int    `json:"count,omitempty" jsonschema:"how many copies"`
}

// copyTool validates its arguments through a generated schema and counts
// its runs, so tests can tell that a rejected call never ran.
func copyTool(runs *atomic.Int32) tool.Tool {
	return tool.MustFunc(tool.Spec{
		Name:        "copy",
		Description: "Copy a file.",
		Idempotent:  true,
	}, func(_ context.Context, _ tool.Call, a copyArgs) (results.Outcome, error) {
		runs.Add(1)
		return results.SucceedText(fmt.Sprintf("copied %s x%d", a.Path, a.Count)), nil
	})
}

func TestRunToolPassesTheCall(t *testing.T) {
	var got tool.Call
	echo := newFake("echo", func(_ context.Context, call tool.Call) (results.Outcome, error) {
		got = call
		return results.SucceedText("ok"), nil
	})
	acts := newActivities(t, echo)
	out := mustRun(t, acts, RunToolInput{
		TurnID:    "turn-7",
		CallID:    "call-3",
		Tool:      "echo",
		Arguments: json.RawMessage(`{"x":1}`),
		User:      "ann",
	})
	require.Equal(t, results.SucceedText("ok"), out)
	require.Equal(t, "turn-7", got.TurnID)
	require.Equal(t, "call-3", got.CallID)
	require.JSONEq(t, `{"x":1}`, string(got.Arguments))
	require.Nil(t, got.Resume)
	require.Equal(t, acts.Workspace, got.Workspace)
	require.Equal(t, acts.Workspace, got.WorkDir)
	require.Equal(t, "ann", got.User)
}

func TestRunToolRejectsBadCalls(t *testing.T) {
	cases := []struct {
		name string
		tool string
		args string
		want []string // substrings of the tool_error message
	}{
		{name: "unknown tool", tool: "nope", args: `{"path":"a"}`, want: []string{`unknown tool "nope"`}},
		{name: "missing required field", tool: "copy", args: `{"count":2}`, want: []string{"invalid arguments for copy", "missing", "path"}},
		{name: "empty object", tool: "copy", args: `{}`, want: []string{"invalid arguments for copy", "missing", "path"}},
		{name: "null arguments", tool: "copy", args: `null`, want: []string{"invalid arguments for copy", "object"}},
		{name: "wrong type", tool: "copy", args: `{"path":3}`, want: []string{"invalid arguments for copy", "path", "string"}},
		{name: "wrong type of optional field", tool: "copy", args: `{"path":"a","count":"two"}`, want: []string{"count", "integer"}},
		{name: "fraction for an integer", tool: "copy", args: `{"path":"a","count":1.5}`, want: []string{"count", "integer"}},
		{name: "unexpected field", tool: "copy", args: `{"path":"a","colour":"red"}`, want: []string{"colour"}},
		{name: "not an object", tool: "copy", args: `["a"]`, want: []string{"invalid arguments for copy", "object"}},
		{name: "malformed JSON", tool: "copy", args: `{"path":`, want: []string{"invalid arguments for copy", "not valid JSON"}},
		{name: "not JSON at all", tool: "copy", args: `path=a`, want: []string{"not valid JSON"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			acts := newActivities(t, copyTool(&runs))
			// Through a raw runner: a json.RawMessage that is not JSON
			// cannot be encoded as activity input (the workflow rejects such
			// calls itself), but RunTool must still cope with one.
			out := runToolRaw(t, acts, RunToolInput{Tool: tc.tool}, tc.args)
			require.Equal(t, results.KindToolError, out.Kind)
			for _, w := range tc.want {
				require.Contains(t, out.ToolError.Message, w)
			}
			require.Zero(t, runs.Load(), "a rejected call must not run")
		})
	}

	t.Run("valid arguments run", func(t *testing.T) {
		var runs atomic.Int32
		acts := newActivities(t, copyTool(&runs))
		out := mustRun(t, acts, RunToolInput{Tool: "copy", Arguments: json.RawMessage(`{"path":"a.txt","count":2}`)})
		require.Equal(t, results.SucceedText("copied a.txt x2"), out)
		require.EqualValues(t, 1, runs.Load())
	})
}

func TestRunToolInternalErrors(t *testing.T) {
	const secret = "kaboom-secret-detail"
	cases := []struct {
		name       string
		tool       *fakeTool
		wantRef    string
		wantDetail []string
	}{
		{
			name: "panic with a string",
			tool: newFake("boom", func(context.Context, tool.Call) (results.Outcome, error) {
				panic(secret)
			}),
			wantDetail: []string{"boom panicked", secret},
		},
		{
			name: "panic with an error",
			tool: newFake("boom", func(context.Context, tool.Call) (results.Outcome, error) {
				panic(errors.New(secret))
			}),
			wantDetail: []string{"boom panicked", secret},
		},
		{
			name: "nil map write",
			tool: newFake("boom", func(context.Context, tool.Call) (results.Outcome, error) {
				var m map[string]int
				m[secret]++
				return results.Succeed(), nil
			}),
			wantDetail: []string{"boom panicked", "nil map"},
		},
		{
			name:       "returned error",
			tool:       returns("broken", results.Outcome{}, errors.New(secret)),
			wantDetail: []string{secret},
		},
		{
			name:       "returned error with an outcome",
			tool:       returns("broken", results.SucceedText("half done"), errors.New(secret)),
			wantDetail: []string{secret},
		},
		{
			name: "retryable error from a tool that is not idempotent",
			tool: returns("post", results.Outcome{}, tool.Retryable(errors.New(secret))),
			// Not idempotent: it must not run again, so no activity retry.
			wantDetail: []string{secret},
		},
		{
			name:       "internal error without a ref gets one and keeps its detail",
			tool:       returns("db", results.FailInternal("", secret), nil),
			wantDetail: []string{secret},
		},
		{
			name:       "internal error with its own ref keeps it",
			tool:       returns("db", results.FailInternal("db-42", secret), nil),
			wantRef:    "db-42",
			wantDetail: []string{secret},
		},
		{
			name:       "success without a body",
			tool:       returns("bad", results.Outcome{Kind: results.KindSuccess}, nil),
			wantDetail: []string{"malformed outcome", "no success body"},
		},
		{
			name:       "zero outcome",
			tool:       returns("bad", results.Outcome{}, nil),
			wantDetail: []string{"malformed outcome", "no kind"},
		},
		{
			name:       "unknown kind",
			tool:       returns("bad", results.Outcome{Kind: "maybe"}, nil),
			wantDetail: []string{"malformed outcome", "maybe"},
		},
		{
			name: "two bodies",
			tool: returns("bad", results.Outcome{
				Kind:      results.KindSuccess,
				Success:   &results.Success{},
				ToolError: &results.ToolError{Message: "x"},
			}, nil),
			wantDetail: []string{"malformed outcome", "more than one body"},
		},
		{
			name:       "tool error without a message",
			tool:       returns("bad", results.FailTool(""), nil),
			wantDetail: []string{"malformed outcome", "empty message"},
		},
		{
			name:       "media part without a media type",
			tool:       returns("bad", results.Succeed(results.MediaPart("", []byte{1})), nil),
			wantDetail: []string{"malformed outcome", "media_type"},
		},
		{
			name:       "choice without options",
			tool:       returns("bad", results.NeedChoice("pick one"), nil),
			wantDetail: []string{"malformed outcome", "no options"},
		},
		{
			name:       "connection without a provider",
			tool:       returns("bad", results.NeedConnection("", "hint"), nil),
			wantDetail: []string{"malformed outcome", "no provider"},
		},
		{
			name:       "internal error kind without a body",
			tool:       returns("bad", results.Outcome{Kind: results.KindInternalError}, nil),
			wantDetail: []string{"malformed outcome"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acts := newActivities(t, tc.tool)
			out := mustRun(t, acts, RunToolInput{TurnID: "turn-1", CallID: "call-9", Tool: tc.tool.spec.Name})
			require.Equal(t, results.KindInternalError, out.Kind)
			wantRef := tc.wantRef
			if wantRef == "" {
				wantRef = "turn-1/call-9/1" // turn/call/attempt
			}
			require.Equal(t, wantRef, out.Internal.Ref)
			for _, w := range tc.wantDetail {
				require.Contains(t, out.Internal.Detail, w)
			}
			// The stack goes to the log, not into the outcome.
			require.NotContains(t, out.Internal.Detail, "goroutine ")
			require.NotContains(t, out.Internal.Detail, ".go:")

			// Nothing the model or a CLI summary sees carries the detail.
			seen := renderFailedInternal(t, out)
			require.Contains(t, seen, wantRef)
			require.NotContains(t, seen, secret)
			require.NotContains(t, seen, "panicked")
			require.NotContains(t, seen, "malformed")
			require.NotContains(t, seen, "goroutine ")
		})
	}
}

func TestRunToolRetryableFromIdempotentToolIsAnActivityError(t *testing.T) {
	var runs atomic.Int32
	fetch := newFake("fetch", func(context.Context, tool.Call) (results.Outcome, error) {
		runs.Add(1)
		return results.Outcome{}, tool.Retryable(errors.New("connection reset by peer"))
	})
	fetch.spec.Idempotent = true
	acts := newActivities(t, fetch)

	_, err := runTool(t, newEnv(acts), acts, RunToolInput{Tool: "fetch"})
	appErr := appError(t, err)
	require.Equal(t, "ToolRetryable", appErr.Type())
	require.False(t, appErr.NonRetryable(), "an idempotent tool's transient failure must be retried")
	require.Contains(t, err.Error(), "connection reset by peer")
	require.EqualValues(t, 1, runs.Load())

	// A plain error from the same idempotent tool is not retried.
	plain := returns("fetch", results.Outcome{}, errors.New("bad certificate"))
	plain.spec.Idempotent = true
	acts = newActivities(t, plain)
	out := mustRun(t, acts, RunToolInput{Tool: "fetch"})
	require.Equal(t, results.KindInternalError, out.Kind)
}

func TestRunToolKeepsTheSchemaItRegistered(t *testing.T) {
	// Registration validates and compiles the schema once; a tool whose
	// spec changes afterwards must still not take the worker down, and is
	// held to the schema it registered with.
	shifty := returns("shifty", results.SucceedText("ran"), nil)
	acts := newActivities(t, shifty)
	shifty.spec.Schema = json.RawMessage(`{"type":`)

	out := mustRun(t, acts, RunToolInput{Tool: "shifty", Arguments: json.RawMessage(`{}`)})
	require.Equal(t, results.KindSuccess, out.Kind)
}

func TestRunToolPassesOtherOutcomesThrough(t *testing.T) {
	cases := []struct {
		name string
		out  results.Outcome
	}{
		{"silent success", results.Succeed()},
		{"tool error", results.FailTool("file %s not found", "a.txt")},
		{"approval interrupt", results.NeedApproval("Delete 3 files?", "rm a b c")},
		{"choice interrupt", results.NeedChoice("Which branch?", results.Option{ID: "main"}, results.Option{ID: "dev", Label: "Development"})},
		{"transfer", results.TransferTo("billing-agent", "customer asks about an invoice")},
		{"success with extras", results.SucceedText("fetched").
			WithSources(results.Source{URL: "https://example.com", Title: "Example"}).
			WithDiffs(results.FileDiff{Path: "a.txt", Diff: "-a\n+b\n"}).
			WithDetails(json.RawMessage(`{"status":200}`))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acts := newActivities(t, returns("t", tc.out, nil))
			require.Equal(t, tc.out, mustRun(t, acts, RunToolInput{Tool: "t"}))
		})
	}
}

func TestRunToolTruncatesLargeOutput(t *testing.T) {
	const tenMiB = 10 << 20
	// 64-byte lines: 10 MiB is 163840 of them.
	manyLines := strings.Repeat(strings.Repeat("x", 63)+"\n", tenMiB/64)
	oneLine := strings.Repeat("y", tenMiB)
	require.Len(t, manyLines, tenMiB)

	cases := []struct {
		name      string
		spec      tool.Spec // limits only
		text      string
		wantBytes int // exact length of the truncated text, marker included
	}{
		{
			name:      "default limits, many lines",
			text:      manyLines,
			wantBytes: tool.DefaultMaxOutputBytes,
		},
		{
			name:      "default limits, one line",
			text:      oneLine,
			wantBytes: tool.DefaultMaxOutputBytes,
		},
		{
			name: "line limit bites first",
			spec: tool.Spec{MaxOutputBytes: 1 << 20, MaxOutputLines: 10},
			text: manyLines,
			// ten lines without the last newline, then the marker
			wantBytes: 10*64 - 1 + len(results.TruncatedMarker),
		},
		{
			name:      "byte limit bites first",
			spec:      tool.Spec{MaxOutputBytes: 1000, MaxOutputLines: 100},
			text:      manyLines,
			wantBytes: 1000,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			big := returns("big", results.SucceedText(tc.text), nil)
			big.spec.MaxOutputBytes = tc.spec.MaxOutputBytes
			big.spec.MaxOutputLines = tc.spec.MaxOutputLines
			limits := big.spec.WithDefaults()

			out := mustRun(t, newActivities(t, big), RunToolInput{Tool: "big"})
			require.Equal(t, results.KindSuccess, out.Kind)
			require.Len(t, out.Success.Parts, 1)
			text := out.Success.Parts[0].Text
			require.True(t, strings.HasSuffix(text, results.TruncatedMarker), "truncated text must end with the marker")
			require.Len(t, text, tc.wantBytes)
			require.LessOrEqual(t, len(text), limits.MaxOutputBytes)
			require.LessOrEqual(t, strings.Count(text, "\n"), limits.MaxOutputLines,
				"at most MaxOutputLines lines of output before the marker line")
			require.True(t, strings.HasPrefix(tc.text, strings.TrimSuffix(text, results.TruncatedMarker)))
			require.True(t, out.Success.Truncated)
			require.Len(t, out.Success.Raw, tenMiB)
			require.Equal(t, tc.text, out.Success.Raw, "Raw keeps the whole output for people")
		})
	}

	t.Run("within limits is untouched", func(t *testing.T) {
		small := returns("small", results.SucceedText("line 1\nline 2\n"), nil)
		out := mustRun(t, newActivities(t, small), RunToolInput{Tool: "small"})
		require.Equal(t, results.SucceedText("line 1\nline 2\n"), out)
		require.False(t, out.Success.Truncated)
		require.Empty(t, out.Success.Raw)
	})

	t.Run("truncation does not apply to other kinds", func(t *testing.T) {
		long := results.FailTool("%s", strings.Repeat("z", 100_000))
		out := mustRun(t, newActivities(t, returns("long", long, nil)), RunToolInput{Tool: "long"})
		require.Equal(t, long, out)
	})
}

func TestRunToolMediaPassesThrough(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR fake image bytes")
	cases := []struct {
		name string
		text string
	}{
		{"small text", "here is the chart"},
		{"text truncated", strings.Repeat("a\n", 5000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			shot := returns("screenshot", results.Succeed(
				results.TextPart(tc.text),
				results.MediaPart("image/png", png),
				results.JSONPart(json.RawMessage(`{"w":640,"h":480}`)),
			), nil)
			out := mustRun(t, newActivities(t, shot), RunToolInput{Tool: "screenshot"})
			require.Equal(t, results.KindSuccess, out.Kind)
			require.Len(t, out.Success.Parts, 3)
			require.Equal(t, results.MediaPart("image/png", png), out.Success.Parts[1])
			require.Equal(t, results.PartJSON, out.Success.Parts[2].Type)
			require.JSONEq(t, `{"w":640,"h":480}`, string(out.Success.Parts[2].JSON))
		})
	}
}

func TestRunToolTimeout(t *testing.T) {
	cases := []struct {
		name string
		run  func(ctx context.Context, call tool.Call) (results.Outcome, error)
	}{
		{"returns the context error", func(ctx context.Context, _ tool.Call) (results.Outcome, error) {
			<-ctx.Done()
			return results.Outcome{}, ctx.Err()
		}},
		{"returns an outcome late", func(ctx context.Context, _ tool.Call) (results.Outcome, error) {
			<-ctx.Done()
			return results.SucceedText("too late"), nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			slow := newFake("slow", tc.run)
			slow.spec.Timeout = 50 * time.Millisecond
			acts := newActivities(t, slow)
			start := time.Now()
			out := mustRun(t, acts, RunToolInput{Tool: "slow"})
			require.Equal(t, results.KindToolError, out.Kind)
			require.Equal(t, "slow timed out after 50ms", out.ToolError.Message)
			require.Contains(t, out.ToolError.Message, "timed out after")
			require.Less(t, time.Since(start), 10*time.Second)
		})
	}
}

func TestRunToolHeartbeats(t *testing.T) {
	cases := []struct {
		name      string
		interval  time.Duration
		runFor    time.Duration
		wantBeats bool
	}{
		{"runs longer than the interval", 10 * time.Millisecond, 200 * time.Millisecond, true},
		{"finishes before the first beat", time.Hour, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sawCtxInfo atomic.Bool
			busy := newFake("busy", func(ctx context.Context, _ tool.Call) (results.Outcome, error) {
				// The tool's context is still an activity context.
				sawCtxInfo.Store(activity.IsActivity(ctx) && activity.GetInfo(ctx).ActivityType.Name == RunToolName)
				select {
				case <-time.After(tc.runFor):
				case <-ctx.Done():
				}
				return results.SucceedText("done"), nil
			})
			busy.spec.HeartbeatInterval = tc.interval
			acts := newActivities(t, busy)
			env := newEnv(acts)
			var beats atomic.Int32
			env.SetOnActivityHeartbeatListener(func(info *activity.Info, _ converter.EncodedValues) {
				if info.ActivityType.Name == RunToolName {
					beats.Add(1)
				}
			})
			out, err := runTool(t, env, acts, RunToolInput{Tool: "busy"})
			require.NoError(t, err)
			require.Equal(t, results.SucceedText("done"), out)
			require.True(t, sawCtxInfo.Load())
			if tc.wantBeats {
				require.Positive(t, beats.Load(), "a tool that outlives its heartbeat interval must heartbeat")
			} else {
				require.Zero(t, beats.Load())
			}
			// No heartbeat after the activity returned.
			n := beats.Load()
			time.Sleep(min(3*tc.interval, 100*time.Millisecond))
			require.Equal(t, n, beats.Load())
		})
	}
}

func TestRunToolResume(t *testing.T) {
	schema := json.RawMessage(`{"type":"string"}`)
	var resumes []*tool.Resume
	ask := newFake("ask", func(_ context.Context, call tool.Call) (results.Outcome, error) {
		resumes = append(resumes, call.Resume)
		if call.Resume == nil {
			return results.NeedAnswer("Which colour?", schema), nil
		}
		var answer string
		if err := json.Unmarshal(call.Resume.Answer, &answer); err != nil {
			return results.FailTool("answer is not a string: %v", err), nil
		}
		return results.SucceedText(answer), nil
	})
	acts := newActivities(t, ask)

	first := mustRun(t, acts, RunToolInput{Tool: "ask"})
	require.Equal(t, results.KindInterrupt, first.Kind)
	require.Equal(t, results.InterruptQuestion, first.Interrupt.Type)
	require.Equal(t, "Which colour?", first.Interrupt.Prompt)
	require.JSONEq(t, string(schema), string(first.Interrupt.Schema))

	resume := &tool.Resume{Decision: results.DecisionAnswer, Answer: json.RawMessage(`"blue"`), By: "ann"}
	second := mustRun(t, acts, RunToolInput{Tool: "ask", Resume: resume})
	require.Equal(t, results.SucceedText("blue"), second)

	require.Len(t, resumes, 2)
	require.Nil(t, resumes[0])
	require.Equal(t, results.DecisionAnswer, resumes[1].Decision)
	require.Equal(t, "ann", resumes[1].By)
	require.JSONEq(t, `"blue"`, string(resumes[1].Answer))
}

// connections is an in-memory stand-in for the connection store.
type connections struct {
	mu     sync.Mutex
	tokens map[string]string // user/provider -> token
}

func (c *connections) get(user, provider string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tok, ok := c.tokens[user+"/"+provider]
	return tok, ok
}

func (c *connections) set(user, provider, token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens[user+"/"+provider] = token
}

func TestRunToolConnectionMissingThenPresent(t *testing.T) {
	conns := &connections{tokens: map[string]string{}}
	issues := newFake("list_issues", func(_ context.Context, call tool.Call) (results.Outcome, error) {
		tok, ok := conns.get(call.User, "github")
		if !ok {
			return results.NeedConnection("github", "tollgate connect github", "repo", "read:org"), nil
		}
		return results.SucceedText("3 open issues (token " + tok + ")"), nil
	})
	acts := newActivities(t, issues)

	first := mustRun(t, acts, RunToolInput{Tool: "list_issues", User: "ann"})
	require.Equal(t, results.KindConnectionRequired, first.Kind)
	require.Equal(t, "github", first.Connection.Provider)
	require.Equal(t, []string{"repo", "read:org"}, first.Connection.Scopes)
	require.Equal(t, "tollgate connect github", first.Connection.Hint)

	// Another user's connection does not count.
	conns.set("bob", "github", "bob-token")
	again := mustRun(t, acts, RunToolInput{Tool: "list_issues", User: "ann"})
	require.Equal(t, results.KindConnectionRequired, again.Kind)

	conns.set("ann", "github", "ann-token")
	done := mustRun(t, acts, RunToolInput{
		Tool:   "list_issues",
		User:   "ann",
		Resume: &tool.Resume{Decision: results.DecisionConnected, By: "ann"},
	})
	require.Equal(t, results.SucceedText("3 open issues (token ann-token)"), done)
}

func TestRunToolWorkDir(t *testing.T) {
	cases := []struct {
		name    string
		workDir string
		want    string // relative to the workspace; "" is the workspace
		wantErr string // substring of the tool_error
	}{
		{name: "empty is the workspace", workDir: "", want: ""},
		{name: "dot is the workspace", workDir: ".", want: ""},
		{name: "subdirectory", workDir: "sub", want: "sub"},
		{name: "nested", workDir: "a/b/c", want: "a/b/c"},
		{name: "cleaned", workDir: "a/./b/../c/", want: "a/c"},
		{name: "up and back in", workDir: "a/..", want: ""},
		{name: "dotted name inside", workDir: "..hidden", want: "..hidden"},
		{name: "absolute", workDir: "/etc", wantErr: "must be relative to the workspace"},
		{name: "absolute inside the workspace", workDir: "<ws>/sub", wantErr: "must be relative to the workspace"},
		{name: "parent", workDir: "..", wantErr: "outside the workspace"},
		{name: "escaping", workDir: "../elsewhere", wantErr: "outside the workspace"},
		{name: "escaping after a detour", workDir: "a/../../elsewhere", wantErr: "outside the workspace"},
		{name: "escaping deep", workDir: "a/b/../../../../etc", wantErr: "outside the workspace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			var ran bool
			pwd := newFake("pwd", func(_ context.Context, call tool.Call) (results.Outcome, error) {
				ran, got = true, call.WorkDir
				return results.SucceedText(call.WorkDir), nil
			})
			acts := newActivities(t, pwd)
			workDir := strings.ReplaceAll(tc.workDir, "<ws>", acts.Workspace)
			out := mustRun(t, acts, RunToolInput{Tool: "pwd", WorkDir: workDir})
			if tc.wantErr != "" {
				require.Equal(t, results.KindToolError, out.Kind)
				require.Contains(t, out.ToolError.Message, tc.wantErr)
				if !strings.Contains(workDir, acts.Workspace) {
					require.NotContains(t, out.ToolError.Message, acts.Workspace, "the model must not learn the workspace's host path")
				}
				require.False(t, ran, "the tool must not run outside the workspace")
				return
			}
			require.Equal(t, results.KindSuccess, out.Kind)
			require.True(t, filepath.IsAbs(got), "the tool gets an absolute working directory, got %q", got)
			require.Equal(t, filepath.Join(acts.Workspace, tc.want), got)
		})
	}
}

func TestRunToolReportedWorkDir(t *testing.T) {
	cases := []struct {
		name     string
		reported string // "<ws>" stands for the workspace
		want     string
	}{
		{name: "subdirectory comes back relative", reported: "<ws>/sub", want: "sub"},
		{name: "nested comes back relative", reported: "<ws>/a/b", want: filepath.Join("a", "b")},
		{name: "uncleaned path", reported: "<ws>/a/../b/", want: "b"},
		{name: "the workspace itself is dot", reported: "<ws>", want: "."},
		{name: "outside is dropped", reported: "/etc", want: ""},
		{name: "the parent is dropped", reported: "<ws>/..", want: ""},
		{name: "a sibling sharing the prefix is dropped", reported: "<ws>-sibling", want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var reported string
			cd := newFake("cd", func(context.Context, tool.Call) (results.Outcome, error) {
				return results.SucceedText("changed directory").WithWorkDir(reported), nil
			})
			acts := newActivities(t, cd)
			reported = strings.ReplaceAll(tc.reported, "<ws>", acts.Workspace)
			out := mustRun(t, acts, RunToolInput{Tool: "cd"})
			require.Equal(t, results.KindSuccess, out.Kind)
			require.Equal(t, tc.want, out.Success.WorkDir)
			require.Equal(t, []results.Part{results.TextPart("changed directory")}, out.Success.Parts)
		})
	}

	t.Run("round trip", func(t *testing.T) {
		// What a call reports is what the next call is given.
		cd := newFake("cd", func(_ context.Context, call tool.Call) (results.Outcome, error) {
			next := filepath.Join(call.WorkDir, "deeper")
			require.NoError(t, os.MkdirAll(next, 0o755))
			return results.Succeed().WithWorkDir(next), nil
		})
		acts := newActivities(t, cd)
		dir := ""
		for i := 0; i < 3; i++ {
			out := mustRun(t, acts, RunToolInput{Tool: "cd", WorkDir: dir})
			dir = out.Success.WorkDir
		}
		require.Equal(t, filepath.Join("deeper", "deeper", "deeper"), dir)
	})
}

func TestRunToolCancellation(t *testing.T) {
	cases := []struct {
		name       string
		cause      error
		wantCancel bool
	}{
		{name: "cancelled by the workflow", cause: temporal.NewCanceledError("turn cancelled"), wantCancel: true},
		{name: "worker shutting down", cause: context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{})
			block := newFake("block", func(ctx context.Context, _ tool.Call) (results.Outcome, error) {
				close(started)
				<-ctx.Done()
				// A tool may well turn cancellation into an outcome of its own.
				return results.FailTool("interrupted"), nil
			})
			acts := newActivities(t, block)
			bg, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			env := newEnv(acts, worker.Options{BackgroundActivityContext: bg})
			go func() {
				<-started
				cancel(tc.cause)
			}()

			val, err := env.ExecuteActivity(acts.RunTool, RunToolInput{TurnID: "t", CallID: "c", Tool: "block", Arguments: json.RawMessage(`{}`)})
			require.Error(t, err, "a cancelled call is an activity error, not an outcome")
			require.Nil(t, val)
			select {
			case <-started:
			default:
				t.Fatal("the tool never ran")
			}
			var canceled *temporal.CanceledError
			require.Equal(t, tc.wantCancel, errors.As(err, &canceled), "error: %v", err)
		})
	}
}

// A run the worker's own shutdown cancelled is a lost worker, as a crash
// is: an idempotent tool fails retryably so another worker runs it again;
// a non-idempotent one sends no answer (ErrResultPending), so the server's
// heartbeat timeout ends the attempt and the turn reports "outcome
// unknown". Answering with the cancellation made it an internal error.
func TestRunToolWorkerShutdownLooksLikeALostWorker(t *testing.T) {
	for _, idempotent := range []bool{true, false} {
		t.Run(fmt.Sprintf("idempotent=%v", idempotent), func(t *testing.T) {
			started := make(chan struct{})
			block := newFake("block", func(ctx context.Context, _ tool.Call) (results.Outcome, error) {
				close(started)
				<-ctx.Done()
				return results.Outcome{}, ctx.Err()
			})
			block.spec.Idempotent = idempotent
			acts := newActivities(t, block)
			bg, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			env := newEnv(acts, worker.Options{BackgroundActivityContext: bg})
			go func() {
				<-started
				cancel(worker.ErrWorkerShutdown)
			}()

			_, err := env.ExecuteActivity(acts.RunTool, RunToolInput{TurnID: "t", CallID: "c", Tool: "block", Arguments: json.RawMessage(`{}`)})
			if !idempotent {
				require.ErrorIs(t, err, activity.ErrResultPending)
				return
			}
			var appErr *temporal.ApplicationError
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, "WorkerStopped", appErr.Type())
			require.False(t, appErr.NonRetryable())
		})
	}
}
