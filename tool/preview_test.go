package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

func previewingTool(t *testing.T, name string) Tool {
	t.Helper()
	tl, err := FuncWithPreview(Spec{Name: name, Description: "d"},
		func(_ context.Context, _ Call, a pathArgs) (results.Outcome, error) {
			return results.SucceedText("wrote " + a.Path), nil
		},
		func(_ context.Context, _ Call, a pathArgs) ([]results.FileDiff, error) {
			if a.Path == "missing" {
				return nil, WouldFail("%s does not exist", a.Path)
			}
			return []results.FileDiff{{Path: a.Path, Diff: fmt.Sprintf("+%d\n", a.Count)}}, nil
		})
	require.NoError(t, err)
	return tl
}

// handPreviewer implements Previewer itself without setting the flag.
type handPreviewer struct{ spec Spec }

func (h handPreviewer) Spec() Spec { return h.spec }
func (handPreviewer) Run(context.Context, Call) (results.Outcome, error) {
	return results.Succeed(), nil
}
func (handPreviewer) Preview(context.Context, Call) ([]results.FileDiff, error) { return nil, nil }

func TestFuncWithPreview(t *testing.T) {
	tl := previewingTool(t, "w")
	require.True(t, tl.Spec().Previews)
	require.True(t, Describe(tl).Previews)

	p, ok := tl.(Previewer)
	require.True(t, ok)
	diffs, err := p.Preview(context.Background(), Call{Arguments: json.RawMessage(`{"path":"a","count":2}`)})
	require.NoError(t, err)
	require.Equal(t, []results.FileDiff{{Path: "a", Diff: "+2\n"}}, diffs)

	_, err = p.Preview(context.Background(), Call{Arguments: json.RawMessage(`{"path":"missing"}`)})
	msg, ok := WouldFailMessage(err)
	require.True(t, ok)
	require.Equal(t, "missing does not exist", msg)

	// Arguments that do not decode: the sentence Run gives the model.
	_, err = p.Preview(context.Background(), Call{Arguments: json.RawMessage(`{"path":7}`)})
	msg, ok = WouldFailMessage(err)
	require.True(t, ok)
	out, runErr := tl.Run(context.Background(), Call{Arguments: json.RawMessage(`{"path":7}`)})
	require.NoError(t, runErr)
	require.Equal(t, out.ToolError.Message, msg)
	require.Contains(t, msg, "invalid arguments")

	// Run is untouched by the preview.
	out, err = tl.Run(context.Background(), Call{Arguments: json.RawMessage(`{"path":"a"}`)})
	require.NoError(t, err)
	require.Equal(t, "wrote a", out.Success.Parts[0].Text)

	_, err = FuncWithPreview[pathArgs](Spec{Name: "n", Description: "d"}, func(context.Context, Call, pathArgs) (results.Outcome, error) {
		return results.Succeed(), nil
	}, nil)
	require.ErrorContains(t, err, "preview function is nil")
	_, err = FuncWithPreview(Spec{Name: "bad name", Description: "d"}, func(context.Context, Call, pathArgs) (results.Outcome, error) {
		return results.Succeed(), nil
	}, func(context.Context, Call, pathArgs) ([]results.FileDiff, error) { return nil, nil })
	require.ErrorContains(t, err, `tool name "bad name"`)
}

func TestDescribeSetsPreviewsFromTheTool(t *testing.T) {
	plain := echoTool(t, "plain")
	require.False(t, Describe(plain).Previews)

	hand := handPreviewer{spec: Spec{Name: "hand", Description: "d", Approval: ApprovalNever}}
	require.False(t, hand.Spec().Previews)
	d := Describe(hand)
	require.True(t, d.Previews, "a Preview method is enough")
	require.Equal(t, DefaultTimeout, d.Timeout, "defaults are applied")

	r, err := NewRegistry(plain, hand, previewingTool(t, "w"))
	require.NoError(t, err)
	previews := map[string]bool{}
	for _, s := range r.Specs() {
		previews[s.Name] = s.Previews
	}
	require.Equal(t, map[string]bool{"plain": false, "hand": true, "w": true}, previews)
}

func TestRegisterRefusesPreviewsWithoutMethod(t *testing.T) {
	tl := fakeSpecTool{spec: Spec{Name: "liar", Description: "d", Approval: ApprovalNever, Previews: true}}
	_, err := NewRegistry(tl)
	require.ErrorContains(t, err, "liar sets Previews but has no Preview method")
}

type fakeSpecTool struct{ spec Spec }

func (f fakeSpecTool) Spec() Spec { return f.spec }
func (fakeSpecTool) Run(context.Context, Call) (results.Outcome, error) {
	return results.Succeed(), nil
}

func TestWouldFailMessage(t *testing.T) {
	_, ok := WouldFailMessage(nil)
	require.False(t, ok)
	_, ok = WouldFailMessage(errors.New("disk on fire"))
	require.False(t, ok)
	msg, ok := WouldFailMessage(fmt.Errorf("wrapped: %w", WouldFail("x is %d", 1)))
	require.True(t, ok)
	require.Equal(t, "x is 1", msg)
}

func TestSpecPreviewsOnTheWire(t *testing.T) {
	// Omitted when false, so specs of tools that cannot preview encode as
	// before and specs recorded before the flag existed read as false.
	b, err := json.Marshal(Spec{Name: "x", Description: "d"}.WithDefaults())
	require.NoError(t, err)
	require.NotContains(t, string(b), "previews")
	var s Spec
	require.NoError(t, json.Unmarshal(b, &s))
	require.False(t, s.Previews)

	b, err = json.Marshal(Spec{Name: "x", Description: "d", Previews: true})
	require.NoError(t, err)
	require.Contains(t, string(b), `"previews":true`)
}
