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

var (
	one = purpose{"one", "label one"}
	two = purpose{"two", "label two"}
)

func signer(t *testing.T, secrets ...string) *Signer {
	t.Helper()
	var bs [][]byte
	for _, s := range secrets {
		bs = append(bs, []byte(strings.Repeat(s, MinSecretLen)))
	}
	s, err := NewSigner(bs...)
	require.NoError(t, err)
	return s
}

func TestSealOpen(t *testing.T) {
	s := signer(t, "a")
	tok, err := s.seal(one, claims{A: "x", N: 7})
	require.NoError(t, err)
	var got claims
	require.NoError(t, s.open(one, tok, &got))
	require.Equal(t, claims{A: "x", N: 7}, got)

	// Another purpose, another secret, a changed byte: refused, and the
	// claims are left alone.
	var untouched claims
	require.ErrorContains(t, s.open(two, tok, &untouched), "signature mismatch")
	require.ErrorContains(t, signer(t, "b").open(one, tok, &untouched), "signature mismatch")
	forged := "eyJhIjoieSIsIm4iOjd9" + tok[strings.Index(tok, "."):]
	require.ErrorContains(t, s.open(one, forged, &untouched), "signature mismatch")
	require.Equal(t, claims{}, untouched)

	for token, why := range map[string]string{
		"":                                     "malformed token",
		"nodot":                                "malformed token",
		"abc.":                                 "malformed token",
		"abc.!!!":                              "malformed signature",
		"abc.YWJj":                             "malformed signature",
		strings.Repeat("a", MaxTokenLen) + ".": "token too long",
	} {
		require.ErrorContains(t, s.open(one, token, &untouched), why, "%q", token)
	}
}

// An authentic payload with fields the reader does not know is refused:
// claims never carry more than their type says.
func TestOpenRefusesUnknownFields(t *testing.T) {
	s := signer(t, "a")
	tok, err := s.seal(one, map[string]any{"a": "x", "extra": true})
	require.NoError(t, err)
	var got claims
	require.ErrorContains(t, s.open(one, tok, &got), "unreadable claims")
}

func TestLimits(t *testing.T) {
	_, err := signer(t, "a").seal(one, claims{A: strings.Repeat("x", MaxTokenLen)})
	require.ErrorContains(t, err, "over 2048")
	require.Len(t, NewID(), 22)
	require.NotEqual(t, NewID(), NewID())
}

// Parts are kept apart: moving a byte from one part to the next changes
// the MAC.
func TestMACSeparatesParts(t *testing.T) {
	s := signer(t, "a")
	require.NotEqual(t, s.mac("l", "ab", "c"), s.mac("l", "a", "bc"))
	require.NotEqual(t, s.mac("l", "a"), s.mac("m", "a"))
	require.Equal(t, s.mac("l", "a", "b"), signer(t, "a", "b").mac("l", "a", "b"), "the first secret MACs")
}

func TestCheckClaims(t *testing.T) {
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	turn := func(v string) field { return field{"turn", v} }
	require.NoError(t, checkClaims("abc-_9", exp, turn("t")))
	for want, err := range map[string]error{
		"needs a turn": checkClaims("abc", exp, turn("")),
		"needs an id":  checkClaims("", exp, turn("t")),
		"has a turn that is not valid UTF-8 of at most 256 bytes": checkClaims("abc", exp, turn(strings.Repeat("x", MaxFieldLen+1))),
		"not valid UTF-8": checkClaims("abc", exp, turn("\xff")),
		"not base64url":   checkClaims("a/b", exp, turn("t")),
		"needs an expiry": checkClaims("abc", time.Time{}, turn("t")),
	} {
		require.ErrorContains(t, err, want)
	}
	require.Equal(t, "an OAuth state", statePurpose.a())
	require.Equal(t, "a connect link", connectPurpose.a())
}
