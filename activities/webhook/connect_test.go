package webhook_test

import (
	"encoding/json"
	"github.com/tollgate-dev/tollgate/internal/webhooktest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/results"
)

// A call waiting for a connection gets a connect link for its user and
// provider, the same on every delivery, and no approve/deny links.
func TestWaitingConnectionCarriesAConnectLink(t *testing.T) {
	signer, err := signedtoken.NewSigner(linkSecret)
	require.NoError(t, err)
	rcv := webhooktest.NewReceiver(t)
	env := activityEnv(deliverer(t, webhook.Options{URLs: []string{rcv.URL}, Links: signer, GatewayURL: "https://tollgate.example.com"}))
	e := waitingEvent()
	e.User = "alice"
	e.Card = &results.Card{
		CallID: "call_3", Tool: "list_issues", Arguments: json.RawMessage(`{}`), State: results.StateWaitingConnection,
		Connection: &results.ConnectionRequired{Provider: "github", Scopes: []string{"repo"}},
	}
	for range 2 {
		_, err := env.ExecuteActivity(webhook.DeliverName, e)
		require.NoError(t, err)
	}
	got := rcv.Deliveries()
	require.Len(t, got, 2)
	l := verify(t, got[0]).Data.Links
	require.NotNil(t, l)
	require.Empty(t, l.Approve)
	require.Equal(t, l, verify(t, got[1]).Data.Links)
	token, ok := strings.CutPrefix(l.Connect, "https://tollgate.example.com/v1/connect/")
	require.True(t, ok, l.Connect)
	c, err := signer.VerifyConnect(token, eventAt.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, signedtoken.ConnectClaims{Turn: "turn-1", Call: "call_3", User: "alice", Provider: "github", Expires: eventAt.Add(webhook.DefaultLinkTTL), ID: c.ID}, c)
	_, err = signer.VerifyState(token, eventAt)
	require.ErrorIs(t, err, signedtoken.ErrTampered, "a connect link is not a state")
}
