package apikey

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewKeyIsLongRandomAndOnlyItsHashIsKept(t *testing.T) {
	k1, e1, err := New("ops", []Scope{Read}, nil)
	require.NoError(t, err)
	k2, _, err := New("ops", []Scope{Read}, nil)
	require.NoError(t, err)
	require.NotEqual(t, k1, k2)
	require.True(t, strings.HasPrefix(k1, Prefix))
	require.Len(t, k1, len(Prefix)+43, "32 random bytes, base64url without padding")
	require.Equal(t, Hash(k1), e1.SHA256)
	b, err := json.Marshal(e1)
	require.NoError(t, err)
	require.NotContains(t, string(b), k1[len(Prefix):])
}

func TestLookupFindsTheKeyAndNothingElse(t *testing.T) {
	kOps, eOps, err := New("ops", []Scope{Read, Respond}, nil)
	require.NoError(t, err)
	kCI, eCI, err := New("ci", []Scope{Respond}, []string{"write_file"})
	require.NoError(t, err)
	s, err := NewSet(eOps, eCI)
	require.NoError(t, err)

	got, ok := s.Lookup(kOps)
	require.True(t, ok)
	require.Equal(t, "ops", got.Principal)
	require.True(t, got.Has(Read))
	require.False(t, got.Has(Start))
	require.True(t, got.MayAnswer("shell"))

	got, ok = s.Lookup(kCI)
	require.True(t, ok)
	require.Equal(t, "ci", got.Principal)
	require.True(t, got.MayAnswer("write_file"))
	require.False(t, got.MayAnswer("shell"))

	got, ok = s.LookupHash(Hash(kCI))
	require.True(t, ok)
	require.Equal(t, "ci", got.Principal)
	_, ok = s.LookupHash(kCI)
	require.False(t, ok, "a key is not its hash")

	for _, bad := range []string{"", kOps + "x", kOps[:len(kOps)-1], eOps.SHA256, strings.Repeat("a", 10000)} {
		_, ok := s.Lookup(bad)
		require.False(t, ok, "%q", bad)
	}
}

func TestEntryValidation(t *testing.T) {
	good := Entry{Principal: "ops", SHA256: Hash("x"), Scopes: []Scope{Read}}
	require.NoError(t, good.Validate())
	for name, e := range map[string]Entry{
		"empty principal":  {SHA256: Hash("x"), Scopes: []Scope{Read}},
		"principal spaces": {Principal: "a b", SHA256: Hash("x"), Scopes: []Scope{Read}},
		"short hash":       {Principal: "ops", SHA256: "abcd", Scopes: []Scope{Read}},
		"no scopes":        {Principal: "ops", SHA256: Hash("x")},
		"unknown scope":    {Principal: "ops", SHA256: Hash("x"), Scopes: []Scope{"admin"}},
		"blank tool":       {Principal: "ops", SHA256: Hash("x"), Scopes: []Scope{Respond}, Tools: []string{" "}},
	} {
		require.Error(t, e.Validate(), name)
	}
	_, err := ParseScopes("read, respond,read")
	require.NoError(t, err)
	_, err = ParseScopes("read,admin")
	require.ErrorContains(t, err, `unknown scope "admin"`)
	_, err = ParseScopes(" , ")
	require.Error(t, err)
}

func TestParseRefusesUnknownFieldsAndBadEntries(t *testing.T) {
	_, err := Parse([]byte(`{"keys": [{"principal": "ops", "key": "tg_x", "scopes": ["read"]}]}`))
	require.ErrorContains(t, err, "unknown field")
	_, err = Parse([]byte(`{"keys": [{"principal": "ops", "sha256": "00", "scopes": ["read"]}]}`))
	require.ErrorContains(t, err, "key 1")
	_, err = Parse([]byte(`not json`))
	require.Error(t, err)
}

func TestAddToFileAppendsAndTheSetReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	k1, err := AddToFile(path, "ops", []Scope{Read, Respond}, Limits{})
	require.NoError(t, err)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotContains(t, string(data), k1, "the file holds hashes, never keys")

	s, err := Load(path, nil)
	require.NoError(t, err)
	_, ok := s.Lookup(k1)
	require.True(t, ok)

	k2, err := AddToFile(path, "ci", []Scope{Respond}, Limits{Tools: []string{"write_file"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := s.Lookup(k2); return ok }, 5*time.Second, 50*time.Millisecond,
		"a key added to the file works without a restart")
	_, ok = s.Lookup(k1)
	require.True(t, ok, "earlier keys stay")
	require.Equal(t, 2, s.Len())

	// A broken file keeps the keys loaded before.
	require.NoError(t, os.WriteFile(path, []byte("{"), 0o600))
	time.Sleep(reloadEvery + 100*time.Millisecond)
	_, ok = s.Lookup(k2)
	require.True(t, ok)

	_, err = AddToFile(path, "x", []Scope{Read}, Limits{})
	require.Error(t, err, "a malformed file is not overwritten")
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.json"), nil)
	require.ErrorContains(t, err, "open keys file")
}

// A key may be limited to named users; the field is optional,
// so keys files written before it read as they did.
func TestUsersLimitAKey(t *testing.T) {
	entries, err := Parse([]byte(`{"keys": [
		{"principal": "ops", "sha256": "` + Hash("a") + `", "scopes": ["read"]},
		{"principal": "desk", "sha256": "` + Hash("b") + `", "scopes": ["read", "respond", "rerun", "history"], "users": ["ann", "bob@example.com"]}
	]}`))
	require.NoError(t, err)
	require.False(t, entries[0].Limited())
	require.True(t, entries[0].Reaches("anyone"))
	require.True(t, entries[0].Reaches(""))
	require.True(t, entries[1].Limited())
	require.True(t, entries[1].Reaches("ann"))
	require.True(t, entries[1].Reaches("bob@example.com"))
	require.False(t, entries[1].Reaches("carol"))
	require.False(t, entries[1].Reaches(""), "a limited key reaches no turn without a user")
	require.False(t, entries[1].Reaches("Ann"))

	set, err := NewSet(entries...)
	require.NoError(t, err)
	got, ok := set.Lookup("b")
	require.True(t, ok)
	require.Equal(t, []string{"ann", "bob@example.com"}, got.Users)
	got.Users[0] = "mallory"
	again, _ := set.Lookup("b")
	require.Equal(t, "ann", again.Users[0], "a looked-up entry is a copy")

	for name, users := range map[string][]string{
		"empty list": {},
		"blank":      {""},
		"spaces":     {" ann"},
		"quote":      {"a'nn"},
		"backslash":  {`a\nn`},
		"control":    {"a\nn"},
		"too long":   {strings.Repeat("a", 201)},
		"not utf8":   {"\xff"},
	} {
		e := Entry{Principal: "desk", SHA256: Hash("x"), Scopes: []Scope{Read}, Users: users}
		require.Error(t, e.Validate(), name)
	}
}

func TestGroupsAreNamesLikePrincipals(t *testing.T) {
	_, e, err := NewLimited("ann", []Scope{Respond}, Limits{Groups: []string{"leads", "ops"}})
	require.NoError(t, err)
	require.Equal(t, []string{"leads", "ops"}, e.Groups)
	_, _, err = NewLimited("ann", []Scope{Respond}, Limits{Groups: []string{"le ads"}})
	require.EqualError(t, err, `key of ann: group "le ads" must be 1 to 64 letters, digits or ._@+- and start with a letter or digit`)
}
