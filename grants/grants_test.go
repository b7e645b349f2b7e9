package grants

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestArgsHashIsCanonical(t *testing.T) {
	a, err := ArgsHash(json.RawMessage(`{"path":"a.md","n":1.50,"tags":["x","y"],"o":{"b":1,"a":2}}`))
	require.NoError(t, err)
	b, err := ArgsHash(json.RawMessage(" {\"o\": {\"a\": 2, \"b\": 1}, \"tags\": [\"x\", \"y\"], \"n\": 1.50, \"path\": \"a.md\"}\n"))
	require.NoError(t, err)
	require.Equal(t, a, b, "key order and whitespace do not matter")
	c, err := ArgsHash(json.RawMessage(`{"path":"a.md","n":1.50,"tags":["y","x"],"o":{"b":1,"a":2}}`))
	require.NoError(t, err)
	require.NotEqual(t, a, c, "array order does")
	big1, _ := ArgsHash(json.RawMessage(`{"id":9007199254740993}`))
	big2, _ := ArgsHash(json.RawMessage(`{"id":9007199254740992}`))
	require.NotEqual(t, big1, big2, "numbers are compared as written, not as float64")
	_, err = ArgsHash(json.RawMessage(`{"a":1} {"b":2}`))
	require.EqualError(t, err, "the arguments hold more than one JSON value")
}

func TestMatchScopesArgumentsAndFingerprints(t *testing.T) {
	base := Grant{User: "ann", Tool: "write", ToolFingerprint: "t1", By: "bob", Turn: "t", Call: "c"}
	user := base
	user.ID, user.Scope = "g-user", ScopeUser
	sess := base
	sess.ID, sess.Scope, sess.Session = "g-sess", ScopeSession, "s1"
	args := base
	args.ID, args.Scope, args.ArgsHash = "g-args", ScopeUser, "h1"
	call := Call{Tool: "write", ArgsHash: "h1", ToolFingerprint: "t1"}

	g, stale := Match([]Grant{sess}, "s2", call)
	require.Nil(t, g, "another session's grant does not apply")
	require.Empty(t, stale)
	g, _ = Match([]Grant{sess}, "s1", call)
	require.Equal(t, "g-sess", g.ID)
	g, _ = Match([]Grant{user, args}, "", call)
	require.Equal(t, "g-args", g.ID, "the grant limited to these arguments wins")
	g, _ = Match([]Grant{args}, "", Call{Tool: "write", ArgsHash: "h2", ToolFingerprint: "t1"})
	require.Nil(t, g, "other arguments")
	g, _ = Match([]Grant{user}, "", Call{Tool: "read", ToolFingerprint: "t1"})
	require.Nil(t, g, "another tool")

	g, stale = Match([]Grant{user}, "", Call{Tool: "write", ToolFingerprint: "t2"})
	require.Nil(t, g)
	require.Equal(t, []Invalidation{{ID: "g-user", Reason: "tool write changed its definition since the grant was made"}}, stale)
	user.ConnectionFingerprint = "c1"
	_, stale = Match([]Grant{user}, "", Call{Tool: "write", ToolFingerprint: "t1", ConnectionFingerprint: "c2"})
	require.Equal(t, "the user's connection for tool write changed since the grant was made", stale[0].Reason)
	inv := Invalidate([]Grant{user}, stale, time.Unix(0, 0))
	g, stale = Match(inv, "", Call{Tool: "write", ToolFingerprint: "t1", ConnectionFingerprint: "c1"})
	require.Nil(t, g, "an invalidated grant stays so")
	require.Empty(t, stale)
}

func TestAddIsBoundedAndIdempotent(t *testing.T) {
	var gs []Grant
	var err error
	for i := range MaxPerUser {
		gs, err = Add(gs, Grant{ID: fmt.Sprintf("g-%d", i), User: "ann", Scope: ScopeUser, Tool: "write", ToolFingerprint: "t"})
		require.NoError(t, err)
	}
	gs, err = Add(gs, gs[0])
	require.NoError(t, err, "adding a stored grant again is not an error")
	require.Len(t, gs, MaxPerUser)
	_, err = Add(gs, Grant{ID: "g-new", User: "ann", Scope: ScopeUser, Tool: "write", ToolFingerprint: "t"})
	require.EqualError(t, err, "user ann already has 256 remembered grants, the most kept; revoke some (starter grants revoke, or DELETE /v1/grants/{id})")
	gs = Invalidate(gs, []Invalidation{{ID: "g-7", Reason: "changed"}}, time.Unix(0, 0))
	gs, err = Add(gs, Grant{ID: "g-new", User: "ann", Scope: ScopeUser, Tool: "write", ToolFingerprint: "t"})
	require.NoError(t, err, "an invalidated grant makes room")
	require.Len(t, gs, MaxPerUser)
	require.Equal(t, "g-new", gs[len(gs)-1].ID)
	_, err = Add(nil, Grant{ID: "g-x", User: "ann", Scope: ScopeSession, Tool: "write", ToolFingerprint: "t"})
	require.EqualError(t, err, "a session grant names no session")
}
