package signedtoken_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/results"
)

// testdata/tokens.json holds tokens minted under testdata/link.secret by
// gateway/links and connections/oauth, before the formats moved here.
// Links in emails and webhooks already sent, connect links and states at
// a provider now must still verify after any change of this code, each
// only as what it was minted as.
func TestTokensIssuedBeforeStillVerify(t *testing.T) {
	secret, err := signedtoken.LoadSecret("testdata/link.secret")
	require.NoError(t, err)
	s, err := signedtoken.NewSigner(secret)
	require.NoError(t, err)
	raw, err := os.ReadFile("testdata/tokens.json")
	require.NoError(t, err)
	var sent struct {
		Link, Connect, State string
		PKCEMAC              string `json:"pkce_mac"`
	}
	require.NoError(t, json.Unmarshal(raw, &sent))

	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	expires := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	link := signedtoken.LinkClaims{
		Turn: "ticket-4711", Run: "0195f7c1-5d5e-7b8a-9c3d-2e4f6a8b0c1d", Call: "toolu_01A", Decision: results.DecisionApprove,
		ArgsHash: signedtoken.ArgsHash(json.RawMessage(`{"path":"a.txt", "content":"new"}`)), By: "webhook", Expires: expires, ID: "cXVpdGUgYSBnb2xkZW4gaWQ",
	}
	connect := signedtoken.ConnectClaims{Turn: "ticket-4711", Call: "toolu_02B", User: "alice", Provider: "github", Expires: expires, ID: "Y29ubmVjdCBnb2xkZW4gaWQ"}
	state := connect
	state.ID = "c3RhdGUgZ29sZGVuIGlkIDE"

	gotLink, err := s.VerifyLink(sent.Link, now)
	require.NoError(t, err)
	require.Equal(t, link, gotLink, "the arguments hash is the one the link was minted with")
	gotConnect, err := s.VerifyConnect(sent.Connect, now)
	require.NoError(t, err)
	require.Equal(t, connect, gotConnect)
	gotState, err := s.VerifyState(sent.State, now)
	require.NoError(t, err)
	require.Equal(t, state, gotState)
	require.Equal(t, sent.PKCEMAC, base64.RawURLEncoding.EncodeToString(s.VerifierMAC(state.ID, "a-pkce-verifier")), "a sign-in's cookie set before still matches")

	// The same claims still make the same tokens.
	for want, sign := range map[string]func() (string, error){
		sent.Link:    func() (string, error) { return s.SignLink(link) },
		sent.Connect: func() (string, error) { return s.SignConnect(connect) },
		sent.State:   func() (string, error) { return s.SignState(state) },
	} {
		got, err := sign()
		require.NoError(t, err)
		require.Equal(t, want, got)
	}

	// Each kind verifies only as itself, whatever its claims look like.
	verify := map[string]func(string) error{
		"link":    func(tok string) error { _, err := s.VerifyLink(tok, now); return err },
		"connect": func(tok string) error { _, err := s.VerifyConnect(tok, now); return err },
		"state":   func(tok string) error { _, err := s.VerifyState(tok, now); return err },
	}
	for kind, tok := range map[string]string{"link": sent.Link, "connect": sent.Connect, "state": sent.State} {
		for as, v := range verify {
			err := v(tok)
			if as == kind {
				require.NoError(t, err)
				continue
			}
			require.ErrorIs(t, err, signedtoken.ErrTampered, "a %s token verified as a %s", kind, as)
			require.ErrorContains(t, err, "signature mismatch", "refused by its MAC, before its claims are read")
			require.False(t, errors.Is(err, signedtoken.ErrExpired))
		}
	}
}
