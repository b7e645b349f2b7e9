package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/internal/proctest"
)

// The test binary is also the stdio server the tests start: run with
// serverEnvVar set, TestMain serves testServer on stdin and stdout.
const serverEnvVar = "TOLLGATE_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnvVar) == "stdio" {
		// The SDK's Tool has no execution field; the listing of long_job
		// gets one on the way out, as a server with tasks would send it.
		transport := &mcpsdk.IOTransport{Reader: os.Stdin, Writer: taskListing{os.Stdout}}
		if err := testServer().Run(context.Background(), transport); err != nil {
			log.Fatal(err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type noArgs struct{}

// taskListing marks long_job in a tools/list result as requiring tasks.
type taskListing struct{ w *os.File }

func (t taskListing) Write(p []byte) (int, error) {
	out := bytes.ReplaceAll(p, []byte(`"name":"long_job"`), []byte(`"execution":{"taskSupport":"required"},"name":"long_job"`))
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (t taskListing) Close() error { return t.w.Close() }

type nameArgs struct {
	Name string `json:"name" jsonschema:"a name"`
}

var truth = true

// calls counts tool runs in an HTTP test server, where tests can read it.
var calls atomic.Int64

// testServer offers a tool for every mapping under test. It writes what
// it did to the file $MCP_TEST_LOG names, so tests see side effects of
// the stdio server's separate process.
func testServer() *mcpsdk.Server {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil)
	note := func(format string, args ...any) {
		calls.Add(1)
		if path := os.Getenv("MCP_TEST_LOG"); path != "" {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err == nil {
				fmt.Fprintf(f, format+"\n", args...)
				f.Close()
			}
		}
	}
	text := func(s string) *mcpsdk.CallToolResult {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: s}}}
	}

	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "read", Description: "Read everything.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			note("read")
			return &mcpsdk.CallToolResult{
				Content: []mcpsdk.Content{
					&mcpsdk.TextContent{Text: "hello"},
					&mcpsdk.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG")},
					&mcpsdk.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")},
					&mcpsdk.ResourceLink{URI: "file:///notes/a.md", Name: "a.md", Title: "Note A"},
					&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///notes/b.md", MIMEType: "text/markdown", Text: "# B"}},
					&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///notes/c.bin", MIMEType: "application/pdf", Blob: []byte("%PDF")}},
				},
				StructuredContent: map[string]any{"count": 3},
			}, nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "structured", Description: "Only structured content.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{}, StructuredContent: map[string]any{"n": 1}}, nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "write", Description: "Write a name."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, a nameArgs) (*mcpsdk.CallToolResult, any, error) {
			note("write %s", a.Name)
			return text("wrote " + a.Name), nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "upsert", Description: "Set a name (idempotent).", Annotations: &mcpsdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(bool)}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, a nameArgs) (*mcpsdk.CallToolResult, any, error) {
			return text("set " + a.Name), nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "fail", Description: "Always fails.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "no such note"}}}, nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "env", Description: "The server's environment.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			var names []string
			for _, kv := range os.Environ() {
				name, _, _ := strings.Cut(kv, "=")
				names = append(names, name)
			}
			sort.Strings(names)
			return text(strings.Join(names, "\n")), nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "sleep", Description: "Starts a child and sleeps.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			child := exec.Command("sleep", "300")
			if err := child.Start(); err != nil {
				return nil, nil, err
			}
			note("pids %d %d", os.Getpid(), child.Process.Pid)
			time.Sleep(5 * time.Minute)
			return text("woke"), nil, nil
		})
	// detach leaves a process behind that has left the server's process
	// group and session, argv[0] renamed to the given name so that the
	// test finds it from outside whatever PID namespace it ends up in.
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "detach", Description: "Leaves a detached child.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, a nameArgs) (*mcpsdk.CallToolResult, any, error) {
			if err := exec.Command("setsid", "-f", "bash", "-c", `exec -a "$0" sleep 300`, a.Name).Run(); err != nil {
				return nil, nil, err
			}
			for range 200 {
				if len(proctest.Listed(a.Name)) > 0 {
					note("detached %s", a.Name)
					return text("detached"), nil, nil
				}
				time.Sleep(20 * time.Millisecond)
			}
			return nil, nil, fmt.Errorf("the detached child did not start")
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "links", Description: "Links of every scheme.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
				&mcpsdk.ResourceLink{URI: "javascript:alert(document.cookie)", Name: "click me"},
				&mcpsdk.ResourceLink{URI: "data:text/html,<script>alert(1)</script>", Name: "data"},
				&mcpsdk.ResourceLink{URI: "JavaScript:alert(1)", Name: "mixed case"},
				&mcpsdk.ResourceLink{URI: "//evil.example/x", Name: "no scheme"},
				&mcpsdk.ResourceLink{URI: "https://docs.example.com/a", Name: "a", Title: "Doc A"},
				&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "javascript:alert(2)", MIMEType: "text/plain", Text: "embedded"}},
				&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "http://docs.example.com/b", MIMEType: "text/plain", Text: "b"}},
			}}, nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "big", Description: "A large result.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			return text(strings.Repeat("x", 256<<10)), nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "crash", Description: "Dies mid-call.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			if os.Getenv(serverEnvVar) == "" {
				return nil, nil, fmt.Errorf("crash only runs in a process of its own")
			}
			os.Exit(3)
			return nil, nil, nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "remote_ref", Description: "Its schema refers elsewhere.", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://schemas.invalid/a.json"}}}`)},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return text("no"), nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "wordy", Description: strings.Repeat("word ", 2000) + "\x1b[31m", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return text("ok"), nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "sl/ash", Description: "A name Tollgate cannot use.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return text("no"), nil
		})

	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "steps", Description: "Reports progress.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			token := req.Params.GetProgressToken()
			if token == nil {
				return text("no progress token"), nil, nil
			}
			for i := 1; i <= 3; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d\x1b[0m", i)}); err != nil {
					return nil, nil, err
				}
			}
			// Another token's progress is not this call's.
			_ = req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{ProgressToken: "someone-else", Progress: 99})
			return text("stepped"), nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "long_job", Description: "Runs only as a task.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "requires task augmentation"}}}, nil, nil
		})
	addElicitingTools(s, note, text)
	// ask_aside asks on the session's standalone stream, outside the
	// call's own request, and is listed only to a client that declared
	// elicitation (as server-everything does with its elicitation tools).
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "ask_aside", Description: "Asks outside the call's stream."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			note("ask_aside started")
			aside, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			stop := context.AfterFunc(ctx, cancel)
			defer stop()
			r, err := req.Session.Elicit(aside, &mcpsdk.ElicitParams{Message: "Which colour?", RequestedSchema: &jsonschema.Schema{
				Type: "object", Properties: map[string]*jsonschema.Schema{"colour": {Type: "string", Default: json.RawMessage(`"blue"`)}, "shade": {Type: "string"}},
			}})
			if err != nil {
				note("ask_aside elicit failed")
				return nil, nil, err
			}
			note("ask_aside done")
			b, _ := json.Marshal(r.Content)
			return text(r.Action + " " + string(b)), nil, nil
		})
	s.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			res, err := next(ctx, method, req)
			if method != "tools/list" || err != nil {
				return res, err
			}
			ss, _ := req.GetSession().(*mcpsdk.ServerSession)
			if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil {
				return res, nil
			}
			lr := res.(*mcpsdk.ListToolsResult)
			lr.Tools = slices.DeleteFunc(lr.Tools, func(t *mcpsdk.Tool) bool { return t.Name == "ask_aside" })
			return lr, nil
		}
	})
	return s
}

// addElicitingTools adds the tools that ask the user. The MRTR ones work
// for clients of every protocol version (the SDK relays for old ones);
// ask_legacy calls Elicit itself, which only pre-2026 sessions allow.
func addElicitingTools(s *mcpsdk.Server, note func(string, ...any), text func(string) *mcpsdk.CallToolResult) {
	rename := &mcpsdk.ElicitParams{Message: "Overwrite b.md?", RequestedSchema: &jsonschema.Schema{
		Type: "object", Required: []string{"choice"},
		Properties: map[string]*jsonschema.Schema{"choice": {Type: "string", Title: "What to do", Enum: []any{"overwrite", "keep_both"}, Extra: map[string]any{"enumNames": []any{"Overwrite b.md", "Keep both"}}}},
	}}
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "ask", Description: "Rename with a question.", Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: &truth}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, a nameArgs) (*mcpsdk.CallToolResult, any, error) {
			note("ask started %s", a.Name)
			r, ok := req.Params.InputResponses["rename"].(*mcpsdk.ElicitResult)
			if !ok {
				return &mcpsdk.CallToolResult{InputRequests: mcpsdk.InputRequestMap{"rename": rename}}, nil, nil
			}
			if r.Action != "accept" {
				return text("left alone: " + r.Action), nil, nil
			}
			note("ask done %s %v", a.Name, r.Content["choice"])
			return text(fmt.Sprintf("renamed %s: %v", a.Name, r.Content["choice"])), nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "ask_legacy", Description: "Asks the old way."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, a nameArgs) (*mcpsdk.CallToolResult, any, error) {
			note("ask_legacy started")
			r, err := req.Session.Elicit(ctx, rename)
			if err != nil {
				note("ask_legacy elicit failed")
				return nil, nil, err
			}
			r2, err := req.Session.Elicit(ctx, &mcpsdk.ElicitParams{Message: "Really?", RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"sure": {Type: "boolean"}}}})
			if err != nil {
				return nil, nil, err
			}
			note("ask_legacy done")
			return text(fmt.Sprintf("%s %v %v %v", a.Name, r.Action, r.Content["choice"], r2.Content["sure"])), nil, nil
		})
	form := &mcpsdk.ElicitParams{Message: "Who are you?", RequestedSchema: &jsonschema.Schema{
		Type: "object", Required: []string{"name", "age"},
		Properties: map[string]*jsonschema.Schema{"name": {Type: "string"}, "age": {Type: "integer", Minimum: new(float64)}},
	}}
	value := &mcpsdk.ElicitParams{Message: "New name?", RequestedSchema: &jsonschema.Schema{
		Type: "object", Required: []string{"to"},
		Properties: map[string]*jsonschema.Schema{"to": {Type: "string", Title: "New name", MinLength: new(int)}},
	}}
	confirm := &mcpsdk.ElicitParams{Message: "Go on?", RequestedSchema: &jsonschema.Schema{Type: "object"}}
	// ask_chain asks a form, then a value, then a confirmation, one per
	// round; the request state carries the earlier answers.
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "ask_chain", Description: "Asks three questions."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			state := req.Params.RequestState
			for id, r := range req.Params.InputResponses {
				b, _ := json.Marshal(r.(*mcpsdk.ElicitResult))
				state += id + "=" + string(b) + ";"
			}
			switch {
			case !strings.Contains(state, "form="):
				return &mcpsdk.CallToolResult{InputRequests: mcpsdk.InputRequestMap{"form": form}, RequestState: state}, nil, nil
			case !strings.Contains(state, "value="):
				return &mcpsdk.CallToolResult{InputRequests: mcpsdk.InputRequestMap{"value": value}, RequestState: state}, nil, nil
			case !strings.Contains(state, "confirm="):
				return &mcpsdk.CallToolResult{InputRequests: mcpsdk.InputRequestMap{"confirm": confirm}, RequestState: state}, nil, nil
			}
			note("ask_chain done")
			return text(state), nil, nil
		})
	// ask_two asks two things in one round.
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "ask_two", Description: "Asks two questions at once."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			note("ask_two round")
			a, okA := req.Params.InputResponses["a"].(*mcpsdk.ElicitResult)
			b, okB := req.Params.InputResponses["b"].(*mcpsdk.ElicitResult)
			if !okA || !okB {
				return &mcpsdk.CallToolResult{RequestState: "s1", InputRequests: mcpsdk.InputRequestMap{"a": value, "b": confirm}}, nil, nil
			}
			return text(fmt.Sprintf("%s %v %s %s", a.Action, a.Content["to"], b.Action, req.Params.RequestState)), nil, nil
		})
	var n atomic.Int64
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "ask_random", Description: "Asks something new each time."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			if len(req.Params.InputResponses) > 0 {
				return text("answered"), nil, nil
			}
			msg := fmt.Sprintf("Question %d at %s?", n.Add(1), time.Now().Format(time.RFC3339Nano))
			return &mcpsdk.CallToolResult{InputRequests: mcpsdk.InputRequestMap{"q": &mcpsdk.ElicitParams{Message: msg, RequestedSchema: confirm.RequestedSchema}}}, nil, nil
		})
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "ask_url", Description: "Asks the user to open a page."},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ noArgs) (*mcpsdk.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["u"].(*mcpsdk.ElicitResult); ok {
				return text("answered " + r.Action), nil, nil
			}
			return &mcpsdk.CallToolResult{InputRequests: mcpsdk.InputRequestMap{"u": &mcpsdk.ElicitParams{Mode: "url", Message: "Log in", URL: "https://login.invalid/", ElicitationID: "e1"}}}, nil, nil
		})
}
