package webhook_test

import (
	"github.com/tollgate-dev/tollgate/internal/webhooktest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/internal/signedtoken"
)

// A link names the run of the turn it was made in, so the gateway can
// refuse it for another run under the same turn id.
func TestLinksCarryTheTurnsRun(t *testing.T) {
	signer, err := signedtoken.NewSigner(linkSecret)
	require.NoError(t, err)
	rcv := webhooktest.NewReceiver(t)
	env := activityEnv(deliverer(t, webhook.Options{URLs: []string{rcv.URL}, Links: signer, GatewayURL: "https://tollgate.example.com"}))
	e := waitingEvent()
	e.Run = "run-of-turn-1"
	_, err = env.ExecuteActivity(webhook.DeliverName, e)
	require.NoError(t, err)
	l := verify(t, rcv.Deliveries()[0]).Data.Links
	require.NotNil(t, l)
	for _, u := range []string{l.Approve, l.Deny} {
		token := u[strings.LastIndexByte(u, '/')+1:]
		c, err := signer.VerifyLink(token, eventAt)
		require.NoError(t, err)
		require.Equal(t, "run-of-turn-1", c.Run)
	}

	// An event that names no run (one scheduled before runs were named)
	// still goes out, without links the gateway would refuse anyway.
	e = waitingEvent()
	e.ID = "turn-1/call.waiting/call_1/2"
	e.Run = ""
	_, err = env.ExecuteActivity(webhook.DeliverName, e)
	require.NoError(t, err)
	p := verify(t, rcv.Deliveries()[1])
	require.Nil(t, p.Data.Links)
	require.Equal(t, "call_1", p.Data.Card.CallID)
}
