package model_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

type echoProvider struct{ got model.Request }

// Complete calls every tool it was offered, under the names it was sent.
func (p *echoProvider) Complete(_ context.Context, req model.Request) (model.Response, error) {
	p.got = req
	msg := results.Message{Role: results.RoleAssistant}
	for _, t := range req.Tools {
		msg.ToolCalls = append(msg.ToolCalls, results.ToolCall{ID: t.Name, Name: t.Name, Arguments: "{}"})
	}
	return model.Response{Message: msg}, nil
}

func TestWireNamesSendOnlyWhatProviderAPIsTake(t *testing.T) {
	inner := &echoProvider{}
	p := model.WireNames(inner)
	history := []results.Message{{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: "c1", Name: "notes.append", Arguments: "{}"}}}}
	resp, err := p.Complete(context.Background(), model.Request{
		Messages: history,
		Tools:    []model.ToolDef{{Name: "notes.append"}, {Name: "notes_append"}, {Name: "read_file"}},
	})
	require.NoError(t, err)

	var sent []string
	for _, td := range inner.got.Tools {
		sent = append(sent, td.Name)
		require.Regexp(t, `^[A-Za-z0-9_-]{1,64}$`, td.Name)
	}
	require.Equal(t, []string{"notes_append_2", "notes_append", "read_file"}, sent, "a dotted name never takes another tool's name")
	require.Equal(t, "notes_append_2", inner.got.Messages[0].ToolCalls[0].Name, "earlier calls go out under the same wire names")
	require.Equal(t, "notes.append", history[0].ToolCalls[0].Name, "the caller's conversation is not changed")

	var back []string
	for _, c := range resp.Message.ToolCalls {
		back = append(back, c.Name)
	}
	require.Equal(t, []string{"notes.append", "notes_append", "read_file"}, back)
}

func TestWireNamesLeaveUndottedRequestsAlone(t *testing.T) {
	inner := &echoProvider{}
	req := model.Request{Tools: []model.ToolDef{{Name: "read_file"}}}
	_, err := model.WireNames(inner).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, req, inner.got)
}
