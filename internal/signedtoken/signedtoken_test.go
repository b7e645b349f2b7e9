package signedtoken

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type claims struct {
	A string `json:"a"`
	N int    `json:"n"`
}

func keys(t *testing.T, secrets ...string) *Keys {
	t.Helper()
	var bs [][]byte
	for _, s := range secrets {
		bs = append(bs, []byte(strings.Repeat(s, MinSecretLen)))
	}
	k, err := NewKeys(bs...)
	require.NoError(t, err)
	return k
}

func TestSealOpen(t *testing.T) {
	k := keys(t, "a")
	tok, err := k.Seal("label one", claims{A: "x", N: 7})
	require.NoError(t, err)
	var got claims
	require.NoError(t, k.Open("label one", tok, &got))
	require.Equal(t, claims{A: "x", N: 7}, got)

	// Another label, another secret, a changed byte: refused, and the
	// claims are left alone.
	var untouched claims
	require.ErrorContains(t, k.Open("label two", tok, &untouched), "signature mismatch")
	require.ErrorContains(t, keys(t, "b").Open("label one", tok, &untouched), "signature mismatch")
	forged := "eyJhIjoieSIsIm4iOjd9" + tok[strings.Index(tok, "."):]
	require.ErrorContains(t, k.Open("label one", forged, &untouched), "signature mismatch")
	require.Equal(t, claims{}, untouched)

	for token, why := range map[string]string{
		"":                                     "malformed token",
		"nodot":                                "malformed token",
		"abc.":                                 "malformed token",
		"abc.!!!":                              "malformed signature",
		"abc.YWJj":                             "malformed signature",
		strings.Repeat("a", MaxTokenLen) + ".": "token too long",
	} {
		require.ErrorContains(t, k.Open("label one", token, &untouched), why, "%q", token)
	}
}

// The old secret keeps verifying after a rotation; the new one signs.
func TestRotation(t *testing.T) {
	old := keys(t, "a")
	tok, err := old.Seal("l", claims{A: "old"})
	require.NoError(t, err)
	rotated := keys(t, "b", "a")
	var got claims
	require.NoError(t, rotated.Open("l", tok, &got))
	fresh, err := rotated.Seal("l", claims{A: "new"})
	require.NoError(t, err)
	require.NoError(t, keys(t, "b").Open("l", fresh, &got))
	require.Error(t, old.Open("l", fresh, &got), "a token of the new secret does not verify under the old alone")
}

// An authentic payload with fields the reader does not know is refused:
// claims never carry more than their type says.
func TestOpenRefusesUnknownFields(t *testing.T) {
	k := keys(t, "a")
	tok, err := k.Seal("l", map[string]any{"a": "x", "extra": true})
	require.NoError(t, err)
	var got claims
	require.ErrorContains(t, k.Open("l", tok, &got), "unreadable claims")
}

func TestLimits(t *testing.T) {
	_, err := NewKeys()
	require.Error(t, err)
	_, err = NewKeys([]byte("short"))
	require.ErrorContains(t, err, "at least 32")
	_, err = keys(t, "a").Seal("l", claims{A: strings.Repeat("x", MaxTokenLen)})
	require.ErrorContains(t, err, "over 2048")
	require.Len(t, NewID(), 22)
	require.NotEqual(t, NewID(), NewID())
}

// Parts are kept apart: moving a byte from one part to the next changes
// the MAC.
func TestMACSeparatesParts(t *testing.T) {
	k := keys(t, "a")
	require.NotEqual(t, k.MAC("l", "ab", "c"), k.MAC("l", "a", "bc"))
	require.NotEqual(t, k.MAC("l", "a"), k.MAC("m", "a"))
	require.Equal(t, k.MAC("l", "a", "b"), keys(t, "a", "b").MAC("l", "a", "b"), "the first secret MACs")
}

func TestCheckClaims(t *testing.T) {
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	turn := func(v string) Field { return Field{Name: "turn", Value: v} }
	require.NoError(t, CheckClaims("abc-_9", exp, turn("t")))
	for want, err := range map[string]error{
		"needs a turn": CheckClaims("abc", exp, turn("")),
		"needs an id":  CheckClaims("", exp, turn("t")),
		"has a turn that is not valid UTF-8 of at most 256 bytes": CheckClaims("abc", exp, turn(strings.Repeat("x", MaxFieldLen+1))),
		"not valid UTF-8": CheckClaims("abc", exp, turn("\xff")),
		"not base64url":   CheckClaims("a/b", exp, turn("t")),
		"needs an expiry": CheckClaims("abc", time.Time{}, turn("t")),
	} {
		require.ErrorContains(t, err, want)
	}
}
