package links_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/gateway/links"
	"github.com/tollgate-dev/tollgate/results"
)

var (
	keyA = bytes.Repeat([]byte("a"), 32)
	keyB = bytes.Repeat([]byte("b"), 48)
	now  = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
)

func claims() links.Claims {
	return links.Claims{
		Turn:     "turn-1",
		Run:      "0195f7c1-5d5e-7b8a-9c3d-2e4f6a8b0c1d",
		Call:     "call_1",
		Decision: results.DecisionApprove,
		ArgsHash: links.ArgsHash(json.RawMessage(`{"path":"a.txt"}`)),
		By:       "email:ops@example.com",
		Expires:  now.Add(time.Hour),
	}
}

func signer(t *testing.T, keys ...[]byte) *links.Signer {
	t.Helper()
	s, err := links.NewSigner(keys...)
	require.NoError(t, err)
	return s
}

func TestRoundTrip(t *testing.T) {
	s := signer(t, keyA)
	c := claims()
	token, err := s.Sign(c)
	require.NoError(t, err)
	require.NotContains(t, token, "=", "tokens go into URL paths unescaped")
	require.Regexp(t, `^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`, token, "tokens go into URL paths unescaped")

	got, err := s.Verify(token, now)
	require.NoError(t, err)
	require.Len(t, got.ID, 22, "16 random bytes in unpadded base64url")
	c.ID = got.ID
	require.Equal(t, c, got)
	require.Equal(t, "link-"+got.ID, got.UpdateID())

	// A second signing of the same claims is a different link.
	other, err := s.Sign(claims())
	require.NoError(t, err)
	got2, err := s.Verify(other, now)
	require.NoError(t, err)
	require.NotEqual(t, got.ID, got2.ID)

	// A caller-chosen id is kept (webhook deliveries derive theirs so a
	// redelivery carries the same link).
	c.ID = "fixed_id-1"
	token, err = s.Sign(c)
	require.NoError(t, err)
	got, err = s.Verify(token, now)
	require.NoError(t, err)
	require.Equal(t, "fixed_id-1", got.ID)

	// The expiry comes back in UTC whatever zone it was signed in.
	c.Expires = now.Add(time.Hour).In(time.FixedZone("X", 3600))
	token, err = s.Sign(c)
	require.NoError(t, err)
	got, err = s.Verify(token, now)
	require.NoError(t, err)
	require.True(t, got.Expires.Equal(c.Expires))
	require.Equal(t, time.UTC, got.Expires.Location())
}

func TestSignRefusesBadClaims(t *testing.T) {
	s := signer(t, keyA)
	for name, tc := range map[string]struct {
		edit func(*links.Claims)
		want string
	}{
		"no turn":       {func(c *links.Claims) { c.Turn = "" }, "needs a turn"},
		"no run":        {func(c *links.Claims) { c.Run = "" }, "needs a run"},
		"bad run":       {func(c *links.Claims) { c.Run = "\xff" }, "UTF-8"},
		"no call":       {func(c *links.Claims) { c.Call = "" }, "needs a call"},
		"no args hash":  {func(c *links.Claims) { c.ArgsHash = "" }, "arguments hash"},
		"no principal":  {func(c *links.Claims) { c.By = "" }, "principal"},
		"no expiry":     {func(c *links.Claims) { c.Expires = time.Time{} }, "expiry"},
		"answer":        {func(c *links.Claims) { c.Decision = results.DecisionAnswer }, "only approve or deny"},
		"empty kind":    {func(c *links.Claims) { c.Decision = "" }, "only approve or deny"},
		"id with slash": {func(c *links.Claims) { c.ID = "a/b" }, "base64url"},
		"huge field":    {func(c *links.Claims) { c.By = strings.Repeat("x", 1000) }, "at most"},
		"bad utf8":      {func(c *links.Claims) { c.Turn = "\xff" }, "UTF-8"},
	} {
		t.Run(name, func(t *testing.T) {
			c := claims()
			tc.edit(&c)
			_, err := s.Sign(c)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestVerifyRefusesTampering(t *testing.T) {
	s := signer(t, keyA)
	token, err := s.Sign(claims())
	require.NoError(t, err)
	payload, sig, _ := strings.Cut(token, ".")

	// A payload re-encoded with another decision, keeping the old MAC.
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	require.NoError(t, err)
	denied := bytes.Replace(raw, []byte(`"d":"approve"`), []byte(`"d":"deny"`), 1)
	require.NotEqual(t, raw, denied)
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	require.NoError(t, err)
	mac[7] ^= 1
	flipped := base64.RawURLEncoding.EncodeToString(mac)

	otherKey, err := signer(t, keyB).Sign(claims())
	require.NoError(t, err)

	for name, bad := range map[string]string{
		"payload changed":    base64.RawURLEncoding.EncodeToString(denied) + "." + sig,
		"signature changed":  payload + "." + flipped,
		"truncated":          token[:len(token)-5],
		"signature dropped":  payload + ".",
		"no dot":             payload + sig,
		"payload dropped":    "." + sig,
		"garbage":            "not a token at all",
		"empty":              "",
		"extra dot":          token + ".x",
		"padded base64":      payload + "." + sig + "=",
		"huge":               strings.Repeat("A", 1<<20) + "." + sig,
		"signed by another":  otherKey,
		"signature swapped":  payload + "." + strings.SplitN(otherKey, ".", 2)[1],
		"standard alphabet":  strings.NewReplacer("-", "+", "_", "/").Replace(token) + "+/",
		"unsigned plaintext": base64.RawURLEncoding.EncodeToString(raw),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := s.Verify(bad, now)
			require.ErrorIs(t, err, links.ErrTampered)
			require.NotErrorIs(t, err, links.ErrExpired)
			require.Zero(t, c, "no claims from an untrusted token")
		})
	}
}

func TestVerifyRefusesSignedButInvalidClaims(t *testing.T) {
	// A MAC over claims Sign would refuse: only a signer bug or a leaked
	// key makes one, and Verify refuses it all the same.
	for name, payload := range map[string]string{
		"answer decision": `{"t":"t","r":"r","c":"c","d":"answer","h":"h","b":"b","e":"2030-01-01T00:00:00Z","i":"x"}`,
		"unknown field":   `{"t":"t","r":"r","c":"c","d":"approve","h":"h","b":"b","e":"2030-01-01T00:00:00Z","i":"x","admin":true}`,
		"trailing data":   `{"t":"t","r":"r","c":"c","d":"approve","h":"h","b":"b","e":"2030-01-01T00:00:00Z","i":"x"} {}`,
		"not json":        `approve everything`,
	} {
		t.Run(name, func(t *testing.T) {
			token := links.SignRaw(keyA, []byte(payload))
			_, err := signer(t, keyA).Verify(token, now)
			require.ErrorIs(t, err, links.ErrTampered)
		})
	}
}

func TestVerifyRefusesExpired(t *testing.T) {
	s := signer(t, keyA)
	token, err := s.Sign(claims())
	require.NoError(t, err)

	_, err = s.Verify(token, now.Add(time.Hour-time.Nanosecond))
	require.NoError(t, err)
	for _, at := range []time.Time{now.Add(time.Hour), now.Add(48 * time.Hour)} {
		c, err := s.Verify(token, at)
		require.ErrorIs(t, err, links.ErrExpired)
		require.NotErrorIs(t, err, links.ErrTampered)
		require.Zero(t, c)
	}
}

func TestRotation(t *testing.T) {
	old := signer(t, keyA)
	oldToken, err := old.Sign(claims())
	require.NoError(t, err)

	rotated := signer(t, keyB, keyA)
	_, err = rotated.Verify(oldToken, now)
	require.NoError(t, err, "links signed before the rotation still work")

	newToken, err := rotated.Sign(claims())
	require.NoError(t, err)
	_, err = signer(t, keyB).Verify(newToken, now)
	require.NoError(t, err, "the first secret signs")
	_, err = old.Verify(newToken, now)
	require.ErrorIs(t, err, links.ErrTampered, "a signer without the new secret refuses")

	retired := signer(t, keyB)
	_, err = retired.Verify(oldToken, now)
	require.ErrorIs(t, err, links.ErrTampered, "dropping the old secret revokes its links")
}

func TestNewSignerRefusesShortSecrets(t *testing.T) {
	_, err := links.NewSigner()
	require.ErrorContains(t, err, "at least one secret")
	_, err = links.NewSigner(keyA, []byte("short"))
	require.ErrorContains(t, err, "secret 2 is 5 bytes; at least 32")

	// The signer keeps its own copy: a caller reusing its buffer does not
	// change the key.
	k := bytes.Clone(keyA)
	s := signer(t, k)
	token, err := s.Sign(claims())
	require.NoError(t, err)
	k[0] = 'z'
	_, err = s.Verify(token, now)
	require.NoError(t, err)
}

func TestArgsHashIgnoresWhitespace(t *testing.T) {
	a := links.ArgsHash(json.RawMessage(`{"path":"a.txt","content":"x y"}`))
	require.Equal(t, a, links.ArgsHash(json.RawMessage("{ \"path\" : \"a.txt\",\n  \"content\": \"x y\" }\n")))
	require.NotEqual(t, a, links.ArgsHash(json.RawMessage(`{"path":"a.txt","content":"xy"}`)), "space inside strings matters")
	require.NotEqual(t, a, links.ArgsHash(json.RawMessage(`{"path":"b.txt","content":"x y"}`)))
	require.NotEqual(t, a, links.ArgsHash(json.RawMessage(`{"content":"x y","path":"a.txt"}`)), "key order is what the tool sees")
	require.Len(t, a, 43)
	require.Equal(t, links.ArgsHash(nil), links.ArgsHash(json.RawMessage("")))
}

func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	random := make([]byte, 32)
	for i := range random {
		random[i] = byte(i * 7)
	}

	for name, tc := range map[string]struct {
		data []byte
		want []byte
	}{
		"base64 with newline": {[]byte(base64.StdEncoding.EncodeToString(random) + "\n"), random},
		"base64url unpadded":  {[]byte(base64.RawURLEncoding.EncodeToString(random)), random},
		"raw bytes":           {random, random},
		"long passphrase":     {[]byte("correct horse battery staple, fence, lamp\n"), []byte("correct horse battery staple, fence, lamp")},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := links.LoadSecret(write(name, tc.data))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			_, err = links.NewSigner(got)
			require.NoError(t, err)
		})
	}

	_, err := links.LoadSecret(write("short", []byte(base64.StdEncoding.EncodeToString(random[:16]))))
	require.ErrorContains(t, err, "at least 32")
	_, err = links.LoadSecret(write("empty", nil))
	require.ErrorContains(t, err, "is 0 bytes")
	_, err = links.LoadSecret(write("big", bytes.Repeat([]byte("x"), 5000)))
	require.ErrorContains(t, err, "over 4096 bytes")
	_, err = links.LoadSecret(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// A link sent by email before a change of this code must still work
// after it: the token format is fixed.
func TestTokenFormatIsStable(t *testing.T) {
	s, err := links.NewSigner([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	c := links.Claims{Turn: "t", Run: "r", Call: "c", Decision: "approve", ArgsHash: "h", By: "b", Expires: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), ID: "abc"}
	const sent = "eyJ0IjoidCIsInIiOiJyIiwiYyI6ImMiLCJkIjoiYXBwcm92ZSIsImgiOiJoIiwiYiI6ImIiLCJlIjoiMjAzMC0wMS0wMVQwMDowMDowMFoiLCJpIjoiYWJjIn0.aBJSfyVPWUSJqrYZnrfE7288QyOglLwROinaGB71tFk"
	tok, err := s.Sign(c)
	require.NoError(t, err)
	require.Equal(t, sent, tok)
	got, err := s.Verify(sent, time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, c, got)
}

// A token from before links named their run, authentic
// and unexpired, is refused: it would decide for any turn that holds its
// turn id when pressed, a re-created one included.
func TestVerifyRefusesTokensWithoutARun(t *testing.T) {
	s, err := links.NewSigner([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	// Signed by the code before runs were named (the pinned token of then).
	const old = "eyJ0IjoidCIsImMiOiJjIiwiZCI6ImFwcHJvdmUiLCJoIjoiaCIsImIiOiJiIiwiZSI6IjIwMzAtMDEtMDFUMDA6MDA6MDBaIiwiaSI6ImFiYyJ9.79xvjlp5wrRch2Wo7ZQfZmvq2LI1vZWVEjBOe8XIJOU"
	c, err := s.Verify(old, time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
	require.ErrorIs(t, err, links.ErrUnbound)
	require.NotErrorIs(t, err, links.ErrTampered)
	require.Zero(t, c)
	// An old token that is also malformed is tampered, not old.
	_, err = s.Verify(links.SignRaw([]byte(strings.Repeat("k", 32)), []byte(`{"t":"t","c":"c","d":"answer","h":"h","b":"b","e":"2030-01-01T00:00:00Z","i":"x"}`)), time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
	require.ErrorIs(t, err, links.ErrTampered)
}
