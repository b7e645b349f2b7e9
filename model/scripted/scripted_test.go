package scripted

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/compact"
	"github.com/tollgate-dev/tollgate/results"
)

func toolResult(id, name, text string) results.Message {
	return results.Message{Role: results.RoleTool, ToolCallID: id, ToolName: name, Parts: []results.Part{results.TextPart(text)}}
}

// playDemo runs the demo the way the AgentTurn loop does and returns every
// response, then the error for the call past the end.
func playDemo(t *testing.T) ([]model.Response, error) {
	return play(t, "demo")
}

// play runs a built-in script as a conversation would: tool results after
// each call, and after each answer the person's next message.
func play(t *testing.T, name string) ([]model.Response, error) {
	t.Helper()
	s, err := Open(name, "")
	require.NoError(t, err)
	p := New(s)
	msgs := []results.Message{results.UserText("Summarise notes.txt into summary.md")}
	var out []model.Response
	for range 10 {
		resp, err := p.Complete(context.Background(), model.Request{Model: name, Messages: msgs})
		if err != nil {
			return out, err
		}
		out = append(out, resp)
		msgs = append(msgs, resp.Message)
		if len(resp.Message.ToolCalls) == 0 {
			msgs = append(msgs, results.UserText("thanks"))
			continue
		}
		for _, c := range resp.Message.ToolCalls {
			msgs = append(msgs, toolResult(c.ID, c.Name, "ok: "+c.Name))
		}
	}
	t.Fatalf("script %s never ran out", name)
	return nil, nil
}

// The chat script is a conversation of several turns, for sessions: each
// turn answers in text, some after a tool call.
func TestChat(t *testing.T) {
	got, err := play(t, "chat")
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.Equal(t, "script chat has 5 replies; the conversation asks for reply 6", me.Message)
	var calls []string
	for _, r := range got {
		for _, c := range r.Message.ToolCalls {
			calls = append(calls, c.Name+" "+c.Arguments)
		}
	}
	require.Equal(t, []string{`read_file {"path":"notes.txt"}`, `write_file {"path":"todo.md","content":"# To do\n\n- Decide: keep the nightly full backup once point-in-time recovery is on? (from the 28 November notes)\n"}`}, calls)
	require.Empty(t, got[len(got)-1].Message.ToolCalls, "the last turn ends in text")
}

func TestDemo(t *testing.T) {
	got, err := playDemo(t)
	var me *model.Error
	require.ErrorAs(t, err, &me)
	require.False(t, me.Retryable)
	require.Equal(t, "script demo has 4 replies; the conversation asks for reply 5", me.Message)

	require.Len(t, got, 4)
	var names []string
	for _, r := range got[:3] {
		require.Equal(t, model.StopToolCalls, r.StopReason)
		require.Len(t, r.Message.ToolCalls, 1)
		names = append(names, r.Message.ToolCalls[0].Name)
	}
	require.Equal(t, []string{"read_file", "write_file", "ask_user"}, names)
	require.Equal(t, `{"path":"notes.txt"}`, got[0].Message.ToolCalls[0].Arguments)
	var ask struct {
		Prompt  string   `json:"prompt"`
		Options []string `json:"options"`
	}
	require.NoError(t, json.Unmarshal([]byte(got[2].Message.ToolCalls[0].Arguments), &ask))
	require.Equal(t, []string{"formal", "friendly", "brief"}, ask.Options)
	require.Equal(t, model.StopEnd, got[3].StopReason)
	require.Empty(t, got[3].Message.ToolCalls)
	require.NotEmpty(t, got[3].Message.Text())
}

func TestDeterministic(t *testing.T) {
	first, err1 := playDemo(t)
	second, err2 := playDemo(t)
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(second)
	require.Equal(t, string(a), string(b))
	require.Equal(t, err1.Error(), err2.Error())

	// The same call twice on one provider (a retried activity) gets the
	// same reply: nothing is consumed.
	p := New(mustParse(t, `{"replies":[{"text":"one"},{"text":"two"}]}`))
	req := model.Request{Messages: []results.Message{results.UserText("hi")}}
	r1, err := p.Complete(context.Background(), req)
	require.NoError(t, err)
	r2, err := p.Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, r1, r2)
	require.Equal(t, "one", r1.Message.Text())
}

func mustParse(t *testing.T, s string) *Script {
	t.Helper()
	sc, err := Parse("test", []byte(s))
	require.NoError(t, err)
	return sc
}

func TestToolCalls(t *testing.T) {
	p := New(mustParse(t, `{"replies":[{"tool_calls":[
		{"id":"a","name":"read_file","arguments":{ "path" : "x.txt",
		  "limit": 3 }},
		{"name":"write_file","arguments_raw":"{\"path\": \"y"},
		{"name":"list_dir"}
	]}]}`))
	resp, err := p.Complete(context.Background(), model.Request{Messages: []results.Message{results.UserText("go")}})
	require.NoError(t, err)
	require.Equal(t, []results.ToolCall{
		{ID: "a", Name: "read_file", Arguments: `{"path":"x.txt","limit":3}`},
		{ID: "call_1_2", Name: "write_file", Arguments: `{"path": "y`},
		{ID: "call_1_3", Name: "list_dir", Arguments: `{}`},
	}, resp.Message.ToolCalls)
	require.Empty(t, resp.Message.Parts)
	require.Equal(t, model.StopToolCalls, resp.StopReason)
	require.Equal(t, results.RoleAssistant, resp.Message.Role)
}

func TestExpect(t *testing.T) {
	afterCall := []results.Message{
		results.UserText("Please read a.txt"),
		{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{}`}, {ID: "c2", Name: "read_file", Arguments: `{}`}}},
		toolResult("c1", "read_file", "alpha beta"),
		toolResult("c2", "read_file", "gamma"),
	}
	tests := []struct {
		name    string
		expect  string
		msgs    []results.Message
		wantErr string
	}{
		{name: "all checks pass", expect: `{"last_role":"tool","contains":"gamma","tool_results":2}`, msgs: afterCall},
		{name: "first reply sees the prompt", expect: `{"last_role":"user","contains":"read a.txt","tool_results":0}`, msgs: afterCall[:1]},
		{
			name: "wrong last role", expect: `{"last_role":"user"}`, msgs: afterCall,
			wantErr: "script test, reply 2: expected the last message to be from user, got tool",
		},
		{
			name: "missing text", expect: `{"contains":"delta"}`, msgs: afterCall,
			wantErr: `script test, reply 2: expected the messages since the last reply to contain "delta"; they read "alpha beta\ngamma"`,
		},
		{
			name: "text from before the last reply does not count", expect: `{"contains":"read a.txt"}`, msgs: afterCall,
			wantErr: `expected the messages since the last reply to contain "read a.txt"`,
		},
		{
			name: "wrong number of tool results", expect: `{"tool_results":1}`, msgs: afterCall,
			wantErr: "script test, reply 2: expected 1 tool results since the last reply, got 2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Reply 1 and reply 2 carry the same expectation, so whichever
			// the conversation asks for is checked.
			p := New(mustParse(t, `{"replies":[{"text":"1","expect":`+tt.expect+`},{"text":"2","expect":`+tt.expect+`}]}`))
			_, err := p.Complete(context.Background(), model.Request{Messages: tt.msgs})
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			var me *model.Error
			require.ErrorAs(t, err, &me)
			require.False(t, me.Retryable)
			require.Contains(t, me.Message, tt.wantErr)
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, script, wantErr string
	}{
		{"not JSON", `{"replies": [`, "script bad:"},
		{"no replies", `{"replies": []}`, "script bad has no replies"},
		{"unknown field", `{"replies": [{"txt": "hi"}]}`, `unknown field "txt"`},
		{"tool without name", `{"replies": [{"tool_calls": [{"arguments": {}}]}]}`, "reply 1, tool call 1: name is missing"},
		{"both argument forms", `{"replies": [{"tool_calls": [{"name": "x", "arguments": {}, "arguments_raw": "{}"}]}]}`, "not both"},
		{"arguments not an object", `{"replies": [{"tool_calls": [{"name": "x", "arguments": "path"}]}]}`, "must be a JSON object"},
		{"duplicate ids", `{"replies": [{"tool_calls": [{"id": "a", "name": "x"}]}, {"tool_calls": [{"id": "a", "name": "y"}]}]}`, `reply 2, tool call 1: id "a" is already used by script bad, reply 1, tool call 1`},
		{"negative tool_results", `{"replies": [{"expect": {"tool_results": -1}}]}`, "negative"},
		{"negative repeat", `{"replies": [{"text": "x", "repeat": -1}]}`, "repeat must be between 0 and 1000000"},
		{"id in a repeated reply", `{"replies": [{"tool_calls": [{"id": "a", "name": "x"}], "repeat": 2}]}`, "a repeated reply's calls take default ids"},
		{"id a repeat plays", `{"replies": [{"tool_calls": [{"name": "x"}], "repeat": 3}, {"tool_calls": [{"id": "call_2_1", "name": "y"}]}]}`, `reply 2, tool call 1: id "call_2_1" is already used by script bad, reply 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad", []byte(tt.script))
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "scripts"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "scripts", "one.json"), []byte(`{"replies":[{"text":"from a file"}]}`), 0o644))

	s, err := Open("scripts/one.json", dir)
	require.NoError(t, err)
	require.Equal(t, "scripts/one.json", s.Name)
	require.Equal(t, "from a file", s.Replies[0].Text)

	// An absolute path beneath the scripts directory is the same file.
	s, err = Open(filepath.Join(dir, "scripts", "one.json"), dir)
	require.NoError(t, err)
	require.Equal(t, "from a file", s.Replies[0].Text)

	_, err = Open("scripts/missing.json", dir)
	require.ErrorContains(t, err, "read script")
	require.NotErrorIs(t, err, ErrNotAllowed)

	_, err = Open("nosuch", dir)
	require.ErrorContains(t, err, `no built-in script "nosuch" (built-in: chat, demo, issues, long)`)

	require.Equal(t, []string{"chat", "demo", "issues", "long"}, Builtins())
}

func TestOpenConfinesScriptFiles(t *testing.T) {
	base := t.TempDir()
	scripts := filepath.Join(base, "scripts")
	require.NoError(t, os.MkdirAll(filepath.Join(scripts, "sub"), 0o755))
	script := []byte(`{"replies":[{"text":"hi"}]}`)
	require.NoError(t, os.WriteFile(filepath.Join(scripts, "ok.json"), script, 0o644))
	// A valid script outside the directory: refusing it must be the rule's
	// doing, not a parse error.
	outside := filepath.Join(base, "outside.json")
	require.NoError(t, os.WriteFile(outside, script, 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(scripts, "link-out.json")))
	require.NoError(t, os.Symlink("../../outside.json", filepath.Join(scripts, "sub", "rel-out.json")))
	require.NoError(t, os.Symlink("ok.json", filepath.Join(scripts, "link-in.json")))

	t.Run("no scripts directory: built-ins only", func(t *testing.T) {
		_, err := Open("demo", "")
		require.NoError(t, err)
		for _, ref := range []string{outside, "ok.json", "./ok.json", "/etc/passwd"} {
			_, err := Open(ref, "")
			require.ErrorIs(t, err, ErrNotAllowed, ref)
			require.ErrorContains(t, err, "only the built-in scripts (chat, demo, issues, long) may be used")
		}
	})

	allowed := []string{"ok.json", "./ok.json", "sub/../ok.json", filepath.Join(scripts, "ok.json"), "link-in.json"}
	for _, ref := range allowed {
		t.Run("allowed "+ref, func(t *testing.T) {
			s, err := Open(ref, scripts)
			require.NoError(t, err)
			require.Equal(t, "hi", s.Replies[0].Text)
		})
	}

	refused := map[string]string{
		"../outside.json":        "must lie beneath the scripts directory",
		"sub/../../outside.json": "must lie beneath the scripts directory",
		outside:                  "must lie beneath the scripts directory",
		"/etc/passwd":            "must lie beneath the scripts directory",
		scripts + "/../x.json":   "must lie beneath the scripts directory",
		scripts + "-evil/x.json": "must lie beneath the scripts directory",
		"link-out.json":          "symbolic link",
		"sub/rel-out.json":       "symbolic link",
	}
	for ref, want := range refused {
		t.Run("refused "+ref, func(t *testing.T) {
			_, err := Open(ref, scripts)
			require.ErrorIs(t, err, ErrNotAllowed)
			require.ErrorContains(t, err, want)
		})
	}
}

// A conversation compacted by summary goes on with the script where it
// was: the scripted summary counts the replies it stands for.
func TestScriptGoesOnAfterCompaction(t *testing.T) {
	s, err := Parse("c.json", []byte(`{"replies": [{"text": "one"}, {"text": "two"}, {"text": "three"}, {"text": "four"}]}`))
	require.NoError(t, err)
	p := New(s)
	ctx := context.Background()
	conv := []results.Message{results.UserText("a"), results.AssistantText("one"), results.UserText("b"), results.AssistantText("two"), results.UserText("c")}
	system, older, recent := compact.Split(conv, 0)
	sum, err := p.Complete(ctx, model.Request{System: compact.SummarySystem, Messages: compact.SummaryRequest(older, 0)})
	require.NoError(t, err)
	require.Equal(t, "scripted summary of 2 replies", sum.Message.Text())
	conv = compact.Summarized(system, sum.Message.Text(), recent)
	next, err := p.Complete(ctx, model.Request{Messages: conv})
	require.NoError(t, err)
	require.Equal(t, "three", next.Message.Text())
	conv = append(conv, next.Message, results.UserText("d"))

	// Compacted again, the new summary stands for the old one's replies too.
	system, older, recent = compact.Split(conv, 0)
	sum, err = p.Complete(ctx, model.Request{System: compact.SummarySystem, Messages: compact.SummaryRequest(older, 0)})
	require.NoError(t, err)
	require.Equal(t, "scripted summary of 3 replies", sum.Message.Text())
	next, err = p.Complete(ctx, model.Request{Messages: compact.Summarized(system, sum.Message.Text(), recent)})
	require.NoError(t, err)
	require.Equal(t, "four", next.Message.Text())
}

// A repeated reply plays as many turns as it says, each with call ids of
// its own turn, and the replies after it go on from there.
func TestRepeatPlaysAReplyManyTimes(t *testing.T) {
	p := New(mustParse(t, `{"replies":[
		{"text":"first","tool_calls":[{"name":"read_file"}]},
		{"tool_calls":[{"name":"read_file"},{"name":"list_dir"}],"repeat":3},
		{"tool_calls":[{"name":"write_file"}]},
		{"text":"done"}]}`))
	msgs := []results.Message{results.UserText("go")}
	var ids []string
	for {
		resp, err := p.Complete(context.Background(), model.Request{Messages: msgs})
		require.NoError(t, err)
		msgs = append(msgs, resp.Message)
		if len(resp.Message.ToolCalls) == 0 {
			require.Equal(t, "done", resp.Message.Text())
			break
		}
		for _, c := range resp.Message.ToolCalls {
			ids = append(ids, c.ID)
			msgs = append(msgs, toolResult(c.ID, c.Name, "ok"))
		}
	}
	require.Equal(t, []string{"call_1_1", "call_2_1", "call_2_2", "call_3_1", "call_3_2", "call_4_1", "call_4_2", "call_5_1"}, ids)
	_, err := p.Complete(context.Background(), model.Request{Messages: msgs})
	require.ErrorContains(t, err, "has 6 replies; the conversation asks for reply 7")
}

// The built-in long script makes 5,000 calls of read_file, then answers.
func TestLongScriptMakes5000Calls(t *testing.T) {
	s, err := Open("long", "")
	require.NoError(t, err)
	p := New(s)
	require.Equal(t, 5001, s.plays())
	last, ok := s.play(4999)
	require.True(t, ok)
	require.Equal(t, "call_5000_1", last.ToolCalls[0].ID)
	end, ok := s.play(5000)
	require.True(t, ok)
	require.Empty(t, end.ToolCalls)
	// The first call plays from the prompt.
	resp, err := p.Complete(context.Background(), model.Request{Messages: []results.Message{results.UserText("go")}})
	require.NoError(t, err)
	require.Equal(t, "read_file", resp.Message.ToolCalls[0].Name)
}

// A scripted model has a context window, its script's or the default,
// and refuses a request past it as a real provider does; the tokens it
// reports count the tool calls and each message's framing, not only
// the text.
func TestContextWindowRefusesLongRequests(t *testing.T) {
	p := New(mustParse(t, `{"context_tokens": 100, "replies":[{"tool_calls":[{"name":"read_file"}],"repeat":50},{"text":"done"}]}`))
	msgs := []results.Message{results.UserText("go")}
	var last model.Response
	var err error
	for range 50 {
		var resp model.Response
		resp, err = p.Complete(context.Background(), model.Request{Messages: msgs})
		if err != nil {
			break
		}
		last = resp
		c := last.Message.ToolCalls[0]
		msgs = append(msgs, last.Message, toolResult(c.ID, c.Name, ""))
	}
	require.ErrorIs(t, err, model.ErrContextLength)
	require.ErrorContains(t, err, "more than the model's context window of 100")
	require.Greater(t, last.Usage.InputTokens, 80, "the last call that fit was near the window")
	require.LessOrEqual(t, last.Usage.InputTokens, 100)
	require.Less(t, len(msgs), 40, "tool calls count against the window though they carry no text")

	s := mustParse(t, `{"replies":[{"text":"hi"}]}`)
	require.Equal(t, DefaultContextTokens, s.Window())
	_, err = Parse("w.json", []byte(`{"context_tokens": -1, "replies":[{"text":"hi"}]}`))
	require.ErrorContains(t, err, "context_tokens must be between 0")
}

// A summary request too long for its window has its middle cut, where
// the replies cannot be counted: the summary still stands for every one
// of them, by the call ids after the cut, so the script goes on where it
// was rather than playing replies again.
func TestSummaryCountsRepliesOfACutRequest(t *testing.T) {
	p := New(mustParse(t, `{"replies":[{"tool_calls":[{"name":"noop"}],"repeat":500},{"text":"done"}]}`))
	ctx := context.Background()
	msgs := []results.Message{results.UserText("go")}
	for range 300 {
		resp, err := p.Complete(ctx, model.Request{Messages: msgs})
		require.NoError(t, err)
		c := resp.Message.ToolCalls[0]
		msgs = append(msgs, resp.Message, toolResult(c.ID, c.Name, "ok"))
	}
	system, older, recent := compact.Split(msgs, 50)
	req := compact.SummaryRequest(older, 2000)
	require.Contains(t, req[0].Text(), compact.SummaryCut)
	sum, err := p.Complete(ctx, model.Request{System: compact.SummarySystem, Messages: req})
	require.NoError(t, err)
	next, err := p.Complete(ctx, model.Request{Messages: compact.Summarized(system, sum.Message.Text(), recent)})
	require.NoError(t, err)
	require.Equal(t, "call_301_1", next.Message.ToolCalls[0].ID)
}
