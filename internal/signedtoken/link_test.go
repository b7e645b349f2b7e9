package signedtoken_test

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

	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/results"
)

var (
	keyA = bytes.Repeat([]byte("a"), 32)
	keyB = bytes.Repeat([]byte("b"), 48)
	now  = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
)

func claims() signedtoken.LinkClaims {
	return signedtoken.LinkClaims{
		Turn:     "turn-1",
		Run:      "0195f7c1-5d5e-7b8a-9c3d-2e4f6a8b0c1d",
		Call:     "call_1",
		Decision: results.DecisionApprove,
		ArgsHash: signedtoken.ArgsHash(json.RawMessage(`{"path":"a.txt"}`)),
		By:       "email:ops@example.com",
		Expires:  now.Add(time.Hour),
	}
}

func signer(t *testing.T, keys ...[]byte) *signedtoken.Signer {
	t.Helper()
	s, err := signedtoken.NewSigner(keys...)
	require.NoError(t, err)
	return s
}

func TestLinkRoundTrip(t *testing.T) {
	s := signer(t, keyA)
	c := claims()
	token, err := s.SignLink(c)
	require.NoError(t, err)
	require.NotContains(t, token, "=", "tokens go into URL paths unescaped")
	require.Regexp(t, `^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`, token, "tokens go into URL paths unescaped")

	got, err := s.VerifyLink(token, now)
	require.NoError(t, err)
	require.Len(t, got.ID, 22, "16 random bytes in unpadded base64url")
	c.ID = got.ID
	require.Equal(t, c, got)
	require.Equal(t, "link-"+got.ID, got.UpdateID())

	// A second signing of the same claims is a different link.
	other, err := s.SignLink(claims())
	require.NoError(t, err)
	got2, err := s.VerifyLink(other, now)
	require.NoError(t, err)
	require.NotEqual(t, got.ID, got2.ID)

	// A caller-chosen id is kept (webhook deliveries derive theirs so a
	// redelivery carries the same link).
	c.ID = "fixed_id-1"
	token, err = s.SignLink(c)
	require.NoError(t, err)
	got, err = s.VerifyLink(token, now)
	require.NoError(t, err)
	require.Equal(t, "fixed_id-1", got.ID)

	// The expiry comes back in UTC whatever zone it was signed in.
	c.Expires = now.Add(time.Hour).In(time.FixedZone("X", 3600))
	token, err = s.SignLink(c)
	require.NoError(t, err)
	got, err = s.VerifyLink(token, now)
	require.NoError(t, err)
	require.True(t, got.Expires.Equal(c.Expires))
	require.Equal(t, time.UTC, got.Expires.Location())
}

func TestSignLinkRefusesBadClaims(t *testing.T) {
	s := signer(t, keyA)
	for name, tc := range map[string]struct {
		edit func(*signedtoken.LinkClaims)
		want string
	}{
		"no turn":       {func(c *signedtoken.LinkClaims) { c.Turn = "" }, "needs a turn"},
		"no run":        {func(c *signedtoken.LinkClaims) { c.Run = "" }, "needs a run"},
		"bad run":       {func(c *signedtoken.LinkClaims) { c.Run = "\xff" }, "UTF-8"},
		"no call":       {func(c *signedtoken.LinkClaims) { c.Call = "" }, "needs a call"},
		"no args hash":  {func(c *signedtoken.LinkClaims) { c.ArgsHash = "" }, "arguments hash"},
		"no principal":  {func(c *signedtoken.LinkClaims) { c.By = "" }, "principal"},
		"no expiry":     {func(c *signedtoken.LinkClaims) { c.Expires = time.Time{} }, "expiry"},
		"answer":        {func(c *signedtoken.LinkClaims) { c.Decision = results.DecisionAnswer }, "only approve or deny"},
		"empty kind":    {func(c *signedtoken.LinkClaims) { c.Decision = "" }, "only approve or deny"},
		"id with slash": {func(c *signedtoken.LinkClaims) { c.ID = "a/b" }, "base64url"},
		"huge field":    {func(c *signedtoken.LinkClaims) { c.By = strings.Repeat("x", 1000) }, "at most"},
		"bad utf8":      {func(c *signedtoken.LinkClaims) { c.Turn = "\xff" }, "UTF-8"},
	} {
		t.Run(name, func(t *testing.T) {
			c := claims()
			tc.edit(&c)
			_, err := s.SignLink(c)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestVerifyLinkRefusesTampering(t *testing.T) {
	s := signer(t, keyA)
	token, err := s.SignLink(claims())
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

	otherKey, err := signer(t, keyB).SignLink(claims())
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
			c, err := s.VerifyLink(bad, now)
			require.ErrorIs(t, err, signedtoken.ErrTampered)
			require.NotErrorIs(t, err, signedtoken.ErrExpired)
			require.Zero(t, c, "no claims from an untrusted token")
		})
	}
}

func TestVerifyLinkRefusesSignedButInvalidClaims(t *testing.T) {
	// A MAC over claims SignLink would refuse: only a signer bug or a
	// leaked key makes one, and VerifyLink refuses it all the same.
	for name, payload := range map[string]string{
		"answer decision": `{"t":"t","r":"r","c":"c","d":"answer","h":"h","b":"b","e":"2030-01-01T00:00:00Z","i":"x"}`,
		"unknown field":   `{"t":"t","r":"r","c":"c","d":"approve","h":"h","b":"b","e":"2030-01-01T00:00:00Z","i":"x","admin":true}`,
		"trailing data":   `{"t":"t","r":"r","c":"c","d":"approve","h":"h","b":"b","e":"2030-01-01T00:00:00Z","i":"x"} {}`,
		"not json":        `approve everything`,
	} {
		t.Run(name, func(t *testing.T) {
			token := signer(t, keyA).SealLinkRaw([]byte(payload))
			_, err := signer(t, keyA).VerifyLink(token, now)
			require.ErrorIs(t, err, signedtoken.ErrTampered)
		})
	}
}

func TestVerifyLinkRefusesExpired(t *testing.T) {
	s := signer(t, keyA)
	token, err := s.SignLink(claims())
	require.NoError(t, err)

	_, err = s.VerifyLink(token, now.Add(time.Hour-time.Nanosecond))
	require.NoError(t, err)
	for _, at := range []time.Time{now.Add(time.Hour), now.Add(48 * time.Hour)} {
		c, err := s.VerifyLink(token, at)
		require.ErrorIs(t, err, signedtoken.ErrExpired)
		require.NotErrorIs(t, err, signedtoken.ErrTampered)
		require.Zero(t, c)
	}
}

func TestRotation(t *testing.T) {
	old := signer(t, keyA)
	oldToken, err := old.SignLink(claims())
	require.NoError(t, err)

	rotated := signer(t, keyB, keyA)
	_, err = rotated.VerifyLink(oldToken, now)
	require.NoError(t, err, "links signed before the rotation still work")

	newToken, err := rotated.SignLink(claims())
	require.NoError(t, err)
	_, err = signer(t, keyB).VerifyLink(newToken, now)
	require.NoError(t, err, "the first secret signs")
	_, err = old.VerifyLink(newToken, now)
	require.ErrorIs(t, err, signedtoken.ErrTampered, "a signer without the new secret refuses")

	retired := signer(t, keyB)
	_, err = retired.VerifyLink(oldToken, now)
	require.ErrorIs(t, err, signedtoken.ErrTampered, "dropping the old secret revokes its links")
}

func TestNewSignerRefusesShortSecrets(t *testing.T) {
	_, err := signedtoken.NewSigner()
	require.ErrorContains(t, err, "at least one secret")
	_, err = signedtoken.NewSigner(keyA, []byte("short"))
	require.ErrorContains(t, err, "secret 2 is 5 bytes; at least 32")

	// The signer keeps its own copy: a caller reusing its buffer does not
	// change the key.
	k := bytes.Clone(keyA)
	s := signer(t, k)
	token, err := s.SignLink(claims())
	require.NoError(t, err)
	k[0] = 'z'
	_, err = s.VerifyLink(token, now)
	require.NoError(t, err)
}

func TestArgsHashIgnoresWhitespace(t *testing.T) {
	a := signedtoken.ArgsHash(json.RawMessage(`{"path":"a.txt","content":"x y"}`))
	require.Equal(t, a, signedtoken.ArgsHash(json.RawMessage("{ \"path\" : \"a.txt\",\n  \"content\": \"x y\" }\n")))
	require.NotEqual(t, a, signedtoken.ArgsHash(json.RawMessage(`{"path":"a.txt","content":"xy"}`)), "space inside strings matters")
	require.NotEqual(t, a, signedtoken.ArgsHash(json.RawMessage(`{"path":"b.txt","content":"x y"}`)))
	require.NotEqual(t, a, signedtoken.ArgsHash(json.RawMessage(`{"content":"x y","path":"a.txt"}`)), "key order is what the tool sees")
	require.Len(t, a, 43)
	require.Equal(t, signedtoken.ArgsHash(nil), signedtoken.ArgsHash(json.RawMessage("")))
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
			got, err := signedtoken.LoadSecret(write(name, tc.data))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			_, err = signedtoken.NewSigner(got)
			require.NoError(t, err)
		})
	}

	_, err := signedtoken.LoadSecret(write("short", []byte(base64.StdEncoding.EncodeToString(random[:16]))))
	require.ErrorContains(t, err, "at least 32")
	_, err = signedtoken.LoadSecret(write("empty", nil))
	require.ErrorContains(t, err, "is 0 bytes")
	_, err = signedtoken.LoadSecret(write("big", bytes.Repeat([]byte("x"), 5000)))
	require.ErrorContains(t, err, "over 4096 bytes")
	_, err = signedtoken.LoadSecret(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// A token from before links named their run, authentic and unexpired,
// is refused: it would decide for any turn that holds its
// turn id when pressed, a re-created one included.
func TestVerifyLinkRefusesTokensWithoutARun(t *testing.T) {
	s, err := signedtoken.NewSigner([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	// Signed by the code before runs were named (the pinned token of then).
	const old = "eyJ0IjoidCIsImMiOiJjIiwiZCI6ImFwcHJvdmUiLCJoIjoiaCIsImIiOiJiIiwiZSI6IjIwMzAtMDEtMDFUMDA6MDA6MDBaIiwiaSI6ImFiYyJ9.79xvjlp5wrRch2Wo7ZQfZmvq2LI1vZWVEjBOe8XIJOU"
	c, err := s.VerifyLink(old, time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
	require.ErrorIs(t, err, signedtoken.ErrUnbound)
	require.NotErrorIs(t, err, signedtoken.ErrTampered)
	require.Zero(t, c)
	// An old token that is also malformed is tampered, not old.
	_, err = s.VerifyLink(s.SealLinkRaw([]byte(`{"t":"t","c":"c","d":"answer","h":"h","b":"b","e":"2030-01-01T00:00:00Z","i":"x"}`)), time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC))
	require.ErrorIs(t, err, signedtoken.ErrTampered)
}
