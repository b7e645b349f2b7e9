package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/turnlist"
	"github.com/tollgate-dev/tollgate/workflows"
)

// listFake is the fake connection with visibility: it records the filter
// and answers with its turns.
type listFake struct {
	*fakeTurns
	got   []turnlist.Filter
	turns []turnlist.Turn
	err   error
}

func (l *listFake) List(_ context.Context, f turnlist.Filter) ([]turnlist.Turn, error) {
	l.got = append(l.got, f)
	return l.turns, l.err
}

func TestList(t *testing.T) {
	started := time.Date(2026, 11, 30, 9, 30, 0, 0, time.Local)
	lf := &listFake{fakeTurns: newFake(workflows.State{}), turns: []turnlist.Turn{
		{ID: "tollgate-2", Status: workflows.StatusWaiting, User: "ann", WaitingCalls: []string{"call_write", "call_tone"}, WaitingTools: []string{"ask_user", "write_file"}, StartTime: started},
		{ID: "tollgate-1", Status: workflows.StatusCompleted, WaitingCalls: []string{}, WaitingTools: []string{}, StartTime: started.Add(-time.Hour)},
	}}
	h := newHarness(t, lf.fakeTurns)
	h.dialFn = func() (turns, error) { return lf, nil }

	o := h.run("", "list", "--waiting", "--user", "ann", "--limit", "10")
	require.Equal(t, exitOK, o.code, o.stderr)
	require.Equal(t, []turnlist.Filter{{Status: workflows.StatusWaiting, User: "ann", Limit: 10}}, lf.got)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	require.Len(t, lines, 3)
	require.Regexp(t, `^ID\s+STATUS\s+USER\s+WAITING CALLS\s+TOOLS\s+STARTED$`, lines[0])
	require.Regexp(t, `^tollgate-2\s+waiting\s+ann\s+call_write,call_tone\s+ask_user,write_file\s+2026-11-30 09:30:00$`, lines[1])
	require.Regexp(t, `^tollgate-1\s+completed\s+-\s+-\s+-\s+2026-11-30 08:30:00$`, lines[2])

	o = h.run("", "list", "--json")
	require.Equal(t, exitOK, o.code, o.stderr)
	require.Equal(t, turnlist.Filter{Limit: turnlist.DefaultLimit}, lf.got[1])
	var doc struct {
		Turns []turnlist.Turn `json:"turns"`
	}
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &doc))
	require.Equal(t, "tollgate-2", doc.Turns[0].ID)
	require.Equal(t, []string{"call_write", "call_tone"}, doc.Turns[0].WaitingCalls)

	lf.turns = nil
	o = h.run("", "list", "--status", "failed")
	require.Equal(t, exitOK, o.code, o.stderr)
	require.Equal(t, "no turns\n", o.stdout)

	for _, bad := range [][]string{
		{"list", "--status", "sleeping"},
		{"list", "--waiting", "--status", "failed"},
		{"list", "--limit", "0"},
		{"list", "--limit", "501"},
		{"list", "--user", "a'b"},
		{"list", "extra"},
	} {
		o = h.run("", bad...)
		require.Equal(t, exitRejected, o.code, "%v: %s", bad, o.stderr)
		require.Contains(t, o.stderr, "usage: starter list", bad)
	}

	lf.err = errors.New("the server cannot filter turns by status or user")
	o = h.run("", "list", "--waiting")
	require.Equal(t, exitFailed, o.code)
	require.Contains(t, o.stderr, "cannot filter turns")
}

// --parent lists the turns one turn's agents ran; --children lists them
// with the others, as the gateway's ?parent= and ?children=true do.
func TestListChildTurns(t *testing.T) {
	lf := &listFake{fakeTurns: newFake(workflows.State{}), turns: []turnlist.Turn{
		{ID: "tollgate-1/c2", Status: workflows.StatusWaiting, WaitingCalls: []string{"p1"}, WaitingTools: []string{"write_file"}},
	}}
	h := newHarness(t, lf.fakeTurns)
	h.dialFn = func() (turns, error) { return lf, nil }

	o := h.run("", "list", "--parent", "tollgate-1")
	require.Equal(t, exitOK, o.code, o.stderr)
	require.Equal(t, turnlist.Filter{Parent: "tollgate-1", Limit: turnlist.DefaultLimit}, lf.got[0])
	require.Contains(t, lf.got[0].Query(), "TollgateParent = 'tollgate-1'")
	require.Regexp(t, `(?m)^tollgate-1/c2\s+waiting\s+-\s+p1\s+write_file`, o.stdout)

	o = h.run("", "list", "--children", "--waiting")
	require.Equal(t, exitOK, o.code, o.stderr)
	require.Equal(t, turnlist.Filter{Status: workflows.StatusWaiting, Children: true, Limit: turnlist.DefaultLimit}, lf.got[1])
	require.NotContains(t, lf.got[1].Query(), "TollgateParent")

	o = h.run("", "list")
	require.Equal(t, exitOK, o.code, o.stderr)
	require.Contains(t, lf.got[2].Query(), "TollgateParent IS NULL")

	for _, bad := range [][]string{
		{"list", "--parent", "tollgate-1", "--children"},
		{"list", "--parent", "it's"},
	} {
		o = h.run("", bad...)
		require.Equal(t, exitRejected, o.code, "%v: %s", bad, o.stderr)
		require.Contains(t, o.stderr, "usage: starter list", bad)
	}
	require.Len(t, lf.got, 3, "a refused listing asks nobody")
}
