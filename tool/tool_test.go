package tool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

type pathArgs struct {
	Path  string `json:"path"`
	Count int    `json:"count,omitempty"`
}

func echoTool(t *testing.T, name string) Tool {
	t.Helper()
	tl, err := Func(Spec{Name: name, Description: "d"}, func(_ context.Context, _ Call, a pathArgs) (results.Outcome, error) {
		return results.SucceedText(a.Path), nil
	})
	require.NoError(t, err)
	return tl
}

func TestSpecDefaultsAndValidation(t *testing.T) {
	s := Spec{Name: "x", Description: "d"}.WithDefaults()
	require.Equal(t, ApprovalNever, s.Approval)
	require.Equal(t, DefaultTimeout, s.Timeout)
	require.Equal(t, DefaultHeartbeatInterval, s.HeartbeatInterval)
	require.Equal(t, DefaultMaxOutputBytes, s.MaxOutputBytes)
	require.Equal(t, DefaultMaxOutputLines, s.MaxOutputLines)
	require.JSONEq(t, `{"type":"object"}`, string(s.Schema))
	require.NoError(t, s.Validate())

	kept := Spec{Name: "y", Description: "d", Timeout: time.Second, Approval: ApprovalAlways}.WithDefaults()
	require.Equal(t, time.Second, kept.Timeout)
	require.Equal(t, ApprovalAlways, kept.Approval)

	for _, tt := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "bad name", Description: "d", Approval: ApprovalNever}, `tool name "bad name"`},
		{Spec{Name: "", Description: "d", Approval: ApprovalNever}, `tool name ""`},
		{Spec{Name: ".x", Description: "d", Approval: ApprovalNever}, `tool name ".x"`},
		{Spec{Name: "x.", Description: "d", Approval: ApprovalNever}, `tool name "x."`},
		{Spec{Name: "a..b", Description: "d", Approval: ApprovalNever}, `tool name "a..b"`},
		{Spec{Name: strings.Repeat("a", 65), Description: "d", Approval: ApprovalNever}, "must be 1-64"},
		{Spec{Name: "x", Approval: ApprovalNever}, "has no description"},
		{Spec{Name: "x", Description: "d", Approval: "sometimes"}, `approval "sometimes"`},
		{Spec{Name: "x", Description: "d", Approval: ApprovalNever, Schema: json.RawMessage(`{"type":`)}, "parse JSON schema"},
		{Spec{Name: "x", Description: "d", Approval: ApprovalNever, Schema: json.RawMessage(`{"$ref":"https://example.invalid/s.json"}`)}, "resolve JSON schema"},
	} {
		require.ErrorContains(t, tt.spec.Validate(), tt.want)
	}
	// Names a provider would send today stay valid; MCP tools add a dot.
	for _, name := range []string{"read_file", "x", "notes.append", "a-b.c_d.e", strings.Repeat("a", 64)} {
		require.NoError(t, Spec{Name: name, Description: "d", Approval: ApprovalNever}.Validate(), name)
	}
}

func TestSchemaValidateNamesTheField(t *testing.T) {
	raw, err := SchemaFor[pathArgs]()
	require.NoError(t, err)
	s, err := CompileSchema(raw)
	require.NoError(t, err)

	require.NoError(t, s.Validate(json.RawMessage(`{"path":"a","count":2}`)))
	for _, tt := range []struct {
		doc  string
		want string
	}{
		{`{}`, "path"},
		{`{"path":1}`, "path"},
		{`{"path":"a","count":1.5}`, "count"},
		{`{"path":"a","extra":true}`, "extra"},
		{`{"path":`, "not valid JSON"},
		{`{"path":"a"} {"path":"b"}`, "more than one value"},
		{`[]`, "type"},
	} {
		require.ErrorContains(t, s.Validate(json.RawMessage(tt.doc)), tt.want, tt.doc)
	}
	// Empty arguments are an empty object, which still lacks "path".
	require.ErrorContains(t, s.Validate(nil), "path")

	any, err := CompileSchema(nil)
	require.NoError(t, err)
	require.NoError(t, any.Validate(nil))
}

func TestFuncDecodesArgumentsAndRejectsBadSpecs(t *testing.T) {
	tl := echoTool(t, "echo")
	out, err := tl.Run(context.Background(), Call{Arguments: json.RawMessage(`{"path":"p"}`)})
	require.NoError(t, err)
	require.Equal(t, "p", out.Success.Parts[0].Text)

	out, err = tl.Run(context.Background(), Call{Arguments: json.RawMessage(`{"path":3}`)})
	require.NoError(t, err)
	require.Equal(t, results.KindToolError, out.Kind)

	_, err = Func(Spec{Name: "no description"}, func(context.Context, Call, pathArgs) (results.Outcome, error) {
		return results.Succeed(), nil
	})
	require.Error(t, err)
	require.Panics(t, func() {
		MustFunc(Spec{Name: "x"}, func(context.Context, Call, pathArgs) (results.Outcome, error) { return results.Succeed(), nil })
	})
}

func TestRegistry(t *testing.T) {
	r, err := NewRegistry(echoTool(t, "b"), echoTool(t, "a"), echoTool(t, "c"))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, r.Names())
	specs := r.Specs()
	require.Equal(t, "a", specs[0].Name)
	_, ok := r.Get("b")
	require.True(t, ok)
	_, ok = r.Get("zz")
	require.False(t, ok)
	schema, ok := r.Schema("a")
	require.True(t, ok)
	require.ErrorContains(t, schema.Validate(json.RawMessage(`{"path":1}`)), "path")
	_, ok = r.Schema("zz")
	require.False(t, ok)

	require.ErrorContains(t, r.Register(echoTool(t, "a")), "a is already registered")
	_, err = NewRegistry(echoTool(t, "x"), echoTool(t, "x"))
	require.ErrorContains(t, err, "x is already registered")
	require.ErrorContains(t, r.Register(badSpecTool{}), "register tool")
}

func TestRetryable(t *testing.T) {
	base := errors.New("reset")
	require.Nil(t, Retryable(nil))
	err := Retryable(base)
	require.True(t, IsRetryable(err))
	require.ErrorIs(t, err, base)
	require.Equal(t, "reset", err.Error())
	require.False(t, IsRetryable(base))
}

type badSpecTool struct{}

func (badSpecTool) Spec() Spec { return Spec{Name: "??"} }
func (badSpecTool) Run(context.Context, Call) (results.Outcome, error) {
	return results.Succeed(), nil
}
