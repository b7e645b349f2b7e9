package signedtoken_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/signedtoken"
)

func TestConnectAndStateRoundTrip(t *testing.T) {
	s := signer(t, keyA)
	c := signedtoken.ConnectClaims{Turn: "turn-1", Call: "call_3", User: "alice", Provider: "github", Expires: now.Add(time.Hour)}
	for name, tc := range map[string]struct {
		sign   func(signedtoken.ConnectClaims) (string, error)
		verify func(string, time.Time) (signedtoken.ConnectClaims, error)
	}{
		"connect": {s.SignConnect, s.VerifyConnect},
		"state":   {s.SignState, s.VerifyState},
	} {
		t.Run(name, func(t *testing.T) {
			tok, err := tc.sign(c)
			require.NoError(t, err)
			got, err := tc.verify(tok, now)
			require.NoError(t, err)
			require.Len(t, got.ID, 22, "an empty id is filled")
			want := c
			want.ID = got.ID
			require.Equal(t, want, got)
			require.Equal(t, "oauth-"+got.ID, got.UpdateID())

			_, err = tc.verify(tok, now.Add(time.Hour))
			require.ErrorIs(t, err, signedtoken.ErrExpired)
			_, err = signer(t, keyB).VerifyConnect(tok, now)
			require.ErrorIs(t, err, signedtoken.ErrTampered)

			bad := c
			bad.User = ""
			_, err = tc.sign(bad)
			require.ErrorContains(t, err, "needs a user")
			bad = c
			bad.Provider = strings.Repeat("p", 300)
			_, err = tc.sign(bad)
			require.ErrorContains(t, err, "at most 256 bytes")
		})
	}
	_, err := s.SignState(signedtoken.ConnectClaims{Turn: "t", Call: "c", User: "u", Expires: now})
	require.ErrorContains(t, err, "an OAuth state needs a provider")
}

func TestVerifierMACBindsFlowAndVerifier(t *testing.T) {
	s := signer(t, keyA)
	require.NotEqual(t, s.VerifierMAC("flow", "v"), s.VerifierMAC("flow2", "v"))
	require.NotEqual(t, s.VerifierMAC("flow", "v"), s.VerifierMAC("flow", "w"))
	require.NotEqual(t, s.VerifierMAC("flow", "v"), signer(t, keyB).VerifierMAC("flow", "v"))
}
