package webhook_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/tollgate-dev/tollgate/internal/webhooktest"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/tollgate-dev/tollgate/activities/webhook"
	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/results"
)

var (
	secret     = []byte("0123456789abcdef0123456789abcdef")
	linkSecret = bytes.Repeat([]byte("L"), 32)
	eventAt    = time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC)
)

// verify checks a delivery the way a receiver would: with the spec
// library, configured from the whsec_ string an operator hands out.
func verify(t *testing.T, d webhooktest.Delivery) webhook.Payload {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString(secret))
	require.NoError(t, err)
	require.NoError(t, wh.Verify(d.Body, d.Header))
	require.Equal(t, "application/json", d.Header.Get("Content-Type"))
	var p webhook.Payload
	dec := json.NewDecoder(bytes.NewReader(d.Body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&p))
	return p
}

func deliverer(t *testing.T, o webhook.Options) *webhook.Deliverer {
	t.Helper()
	if o.Secret == nil {
		o.Secret = secret
	}
	d, err := webhook.New(o)
	require.NoError(t, err)
	return d
}

func pendingCard() *results.Card {
	return &results.Card{
		CallID:          "call_1",
		Tool:            "write_file",
		Arguments:       json.RawMessage(`{"path":"a.txt","content":"old"}`),
		EditedArguments: json.RawMessage(`{"path":"a.txt", "content":"new"}`),
		State:           results.StatePendingApproval,
	}
}

func waitingEvent() webhook.Event {
	return webhook.Event{
		ID:   "turn-1/call.waiting/call_1/1",
		Type: webhook.TypeCallWaiting,
		Turn: "turn-1",
		Run:  "run-1",
		User: "ana",
		Card: pendingCard(),
		At:   eventAt,
	}
}

func activityEnv(d *webhook.Deliverer) *testsuite.TestActivityEnvironment {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(d.Deliver, activity.RegisterOptions{Name: webhook.DeliverName})
	return env
}

func TestSignatureVerifiesWithSpecLibrary(t *testing.T) {
	rcv := webhooktest.NewReceiver(t)
	env := activityEnv(deliverer(t, webhook.Options{URLs: []string{rcv.URL}}))
	e := waitingEvent()
	before := time.Now().Unix()
	_, err := env.ExecuteActivity(webhook.DeliverName, e)
	require.NoError(t, err)

	got := rcv.Deliveries()
	require.Len(t, got, 1)
	require.Equal(t, e.ID, got[0].Header.Get("webhook-id"))
	ts, err := strconv.ParseInt(got[0].Header.Get("webhook-timestamp"), 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, ts, before, "the timestamp is the attempt's, not the event's")
	p := verify(t, got[0])
	require.Equal(t, webhook.TypeCallWaiting, p.Type)
	require.Equal(t, eventAt, p.Timestamp, "the body's timestamp is when the event happened")
	require.Equal(t, "turn-1", p.Data.Turn)
	require.Equal(t, "ana", p.Data.User)
	require.Equal(t, "call_1", p.Data.Card.CallID)
	require.Nil(t, p.Data.Links, "no link signer, no links")

	// A body changed in transit, or signed with another secret, fails.
	wh, err := standardwebhooks.NewWebhookRaw(secret)
	require.NoError(t, err)
	tampered := bytes.Replace(got[0].Body, []byte("turn-1"), []byte("turn-2"), 1)
	require.ErrorIs(t, wh.Verify(tampered, got[0].Header), standardwebhooks.ErrNoMatchingSignature)
	other, err := standardwebhooks.NewWebhookRaw(bytes.Repeat([]byte("x"), 32))
	require.NoError(t, err)
	require.ErrorIs(t, other.Verify(got[0].Body, got[0].Header), standardwebhooks.ErrNoMatchingSignature)
}

func TestWaitingEventLinksVerifyAndCarryTheCall(t *testing.T) {
	signer, err := signedtoken.NewSigner(linkSecret)
	require.NoError(t, err)
	rcv := webhooktest.NewReceiver(t)
	d := deliverer(t, webhook.Options{
		URLs: []string{rcv.URL}, Links: signer, GatewayURL: "https://tollgate.example.com/", LinkTTL: 2 * time.Hour,
	})
	env := activityEnv(d)
	e := waitingEvent()
	_, err = env.ExecuteActivity(webhook.DeliverName, e)
	require.NoError(t, err)
	_, err = env.ExecuteActivity(webhook.DeliverName, e)
	require.NoError(t, err)

	got := rcv.Deliveries()
	require.Len(t, got, 2)
	p := verify(t, got[0])
	require.NotNil(t, p.Data.Links)
	require.Equal(t, p.Data.Links, verify(t, got[1]).Data.Links, "a redelivery carries the same links, so the first click wins everywhere")

	claims := map[results.DecisionKind]signedtoken.LinkClaims{}
	for kind, u := range map[results.DecisionKind]string{results.DecisionApprove: p.Data.Links.Approve, results.DecisionDeny: p.Data.Links.Deny} {
		token, ok := strings.CutPrefix(u, "https://tollgate.example.com/v1/links/")
		require.True(t, ok, u)
		c, err := signer.VerifyLink(token, eventAt.Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, "turn-1", c.Turn)
		require.Equal(t, "call_1", c.Call)
		require.Equal(t, kind, c.Decision)
		require.Equal(t, signedtoken.ArgsHash(json.RawMessage(`{"path":"a.txt","content":"new"}`)), c.ArgsHash, "bound to the edited arguments the tool would run with")
		require.Equal(t, webhook.DefaultLinkBy, c.By)
		require.Equal(t, eventAt.Add(2*time.Hour), c.Expires, "expiry counts from the event, not the delivery")
		_, err = signer.VerifyLink(token, eventAt.Add(2*time.Hour))
		require.ErrorIs(t, err, signedtoken.ErrExpired)
		claims[kind] = c
	}
	require.NotEqual(t, claims[results.DecisionApprove].UpdateID(), claims[results.DecisionDeny].UpdateID())

	// Another wait of the same call (a new event id) gets new links.
	e.ID = "turn-1/call.waiting/call_1/2"
	_, err = env.ExecuteActivity(webhook.DeliverName, e)
	require.NoError(t, err)
	again := verify(t, rcv.Deliveries()[2]).Data.Links
	token, _ := strings.CutPrefix(again.Approve, "https://tollgate.example.com/v1/links/")
	c, err := signer.VerifyLink(token, eventAt)
	require.NoError(t, err)
	require.NotEqual(t, claims[results.DecisionApprove].ID, c.ID)
}

func TestLinksOnlyForApprovals(t *testing.T) {
	signer, err := signedtoken.NewSigner(linkSecret)
	require.NoError(t, err)
	rcv := webhooktest.NewReceiver(t)
	env := activityEnv(deliverer(t, webhook.Options{URLs: []string{rcv.URL}, Links: signer, GatewayURL: "http://127.0.0.1:8080"}))

	question := waitingEvent()
	question.Card = &results.Card{
		CallID: "call_2", Tool: "ask", Arguments: json.RawMessage(`{}`), State: results.StateWaitingAnswer,
		Interrupt: &results.Interrupt{Type: results.InterruptQuestion, Prompt: "Which file?"},
	}
	decided := waitingEvent()
	decided.Type = webhook.TypeCallDecided
	decided.Card.State = results.StateRunning
	for _, e := range []webhook.Event{question, decided} {
		_, err := env.ExecuteActivity(webhook.DeliverName, e)
		require.NoError(t, err)
	}
	for _, d := range rcv.Deliveries() {
		require.Nil(t, verify(t, d).Data.Links)
	}
}

func TestTurnEndedIsBoundedAndKeepsOperatorDetail(t *testing.T) {
	rcv := webhooktest.NewReceiver(t)
	env := activityEnv(deliverer(t, webhook.Options{URLs: []string{rcv.URL}}))
	_, err := env.ExecuteActivity(webhook.DeliverName, webhook.Event{
		ID: "turn-1/turn.ended", Type: webhook.TypeTurnEnded, Turn: "turn-1", Status: "completed",
		Text: strings.Repeat("é", webhook.MaxText), At: eventAt,
	})
	require.NoError(t, err)
	p := verify(t, rcv.Deliveries()[0])
	require.Equal(t, "completed", p.Data.Status)
	require.LessOrEqual(t, len(p.Data.Text), webhook.MaxText)
	require.True(t, strings.HasSuffix(p.Data.Text, results.TruncatedMarker))

	failed := waitingEvent()
	failed.Type = webhook.TypeCallDecided
	failed.Card.State = results.StateFailed
	failed.Card.Failure = &results.Failure{Reason: results.FailureInternal, Ref: "ref-7", Detail: "dial tcp 10.0.0.3:5432: connection refused"}
	_, err = env.ExecuteActivity(webhook.DeliverName, failed)
	require.NoError(t, err)
	got := rcv.Deliveries()[1]
	require.NotContains(t, string(got.Body), "10.0.0.3")
	require.Equal(t, "ref-7", verify(t, got).Data.Card.Failure.Ref)
	require.Equal(t, "dial tcp 10.0.0.3:5432: connection refused", failed.Card.Failure.Detail, "the caller's card is not modified")
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	elsewhere := webhooktest.NewReceiver(t)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	// A caller's client that would follow redirects does not, here.
	env := activityEnv(deliverer(t, webhook.Options{URLs: []string{redirector.URL}, HTTPClient: &http.Client{}}))
	_, err := env.ExecuteActivity(webhook.DeliverName, waitingEvent())
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, webhook.ErrTypeDeliveryFailed, appErr.Type())
	require.False(t, appErr.NonRetryable())
	require.Contains(t, appErr.Error(), "307 Temporary Redirect (redirects are not followed")
	require.Empty(t, elsewhere.Deliveries())
}

func TestFailuresNameTheReceiverNotItsSecretsOrBody(t *testing.T) {
	rcv := webhooktest.NewReceiver(t, http.StatusUnauthorized)
	env := activityEnv(deliverer(t, webhook.Options{URLs: []string{rcv.URL + "/hooks/T000/B000/SECRETPATH?token=SECRETQUERY"}}))
	_, err := env.ExecuteActivity(webhook.DeliverName, waitingEvent())
	require.ErrorContains(t, err, rcv.URL+"/… answered 401 Unauthorized")
	for _, leak := range []string{"SECRETPATH", "SECRETQUERY", "hunter2", "stack trace"} {
		require.NotContains(t, err.Error(), leak)
	}
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	require.False(t, appErr.NonRetryable(), "a 401 is retried: the receiver's key may be fixed within the retry window")

	// A receiver that is not listening: a network error, equally redacted.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	env = activityEnv(deliverer(t, webhook.Options{URLs: []string{dead.URL + "/x?token=SECRETQUERY"}}))
	_, err = env.ExecuteActivity(webhook.DeliverName, waitingEvent())
	require.ErrorContains(t, err, dead.URL+"/…: ")
	require.NotContains(t, err.Error(), "SECRETQUERY")
}

func TestSlowReceiverTimesOut(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	fast := webhooktest.NewReceiver(t)
	env := activityEnv(deliverer(t, webhook.Options{URLs: []string{slow.URL, fast.URL}, Timeout: 200 * time.Millisecond}))
	start := time.Now()
	_, err := env.ExecuteActivity(webhook.DeliverName, waitingEvent())
	require.ErrorContains(t, err, slow.URL+": no answer within 200ms")
	require.Less(t, time.Since(start), 5*time.Second)
	require.Len(t, fast.Deliveries(), 1, "receivers are sent to at once; a slow one delays no other")
}

func TestRetryAfterSetsTheNextAttempt(t *testing.T) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer rcv.Close()
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "999999")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer huge.Close()

	for url, want := range map[string]time.Duration{rcv.URL: 2 * time.Minute, huge.URL: time.Hour} {
		env := activityEnv(deliverer(t, webhook.Options{URLs: []string{url}}))
		_, err := env.ExecuteActivity(webhook.DeliverName, waitingEvent())
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "%v", err)
		require.Equal(t, want, appErr.NextRetryDelay())
	}
}

func TestBadEventsAreNotRetried(t *testing.T) {
	rcv := webhooktest.NewReceiver(t)
	env := activityEnv(deliverer(t, webhook.Options{URLs: []string{rcv.URL}}))
	for name, tc := range map[string]struct {
		edit func(*webhook.Event)
		want string
	}{
		"no id":           {func(e *webhook.Event) { e.ID = "" }, "no id"},
		"id with newline": {func(e *webhook.Event) { e.ID = "a\r\nX-Evil: 1" }, "without control characters"},
		"long id":         {func(e *webhook.Event) { e.ID = strings.Repeat("a", 1001) }, "at most 1000"},
		"unknown type":    {func(e *webhook.Event) { e.Type = "call.exploded" }, `unknown event type "call.exploded"`},
		"no card":         {func(e *webhook.Event) { e.Card = nil }, "needs the call's card"},
		"no turn":         {func(e *webhook.Event) { e.Turn = "" }, "names no turn"},
		"no time":         {func(e *webhook.Event) { e.At = time.Time{} }, "no time"},
		"ended no status": {func(e *webhook.Event) { e.Type = webhook.TypeTurnEnded }, "needs the turn's status"},
	} {
		t.Run(name, func(t *testing.T) {
			e := waitingEvent()
			tc.edit(&e)
			_, err := env.ExecuteActivity(webhook.DeliverName, e)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "%v", err)
			require.Equal(t, webhook.ErrTypeBadEvent, appErr.Type())
			require.True(t, appErr.NonRetryable())
			require.Contains(t, appErr.Error(), tc.want)
		})
	}
	require.Empty(t, rcv.Deliveries())
}

func TestNewRefusesBadOptions(t *testing.T) {
	signer, err := signedtoken.NewSigner(linkSecret)
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		o    webhook.Options
		want string
	}{
		"no urls":         {webhook.Options{Secret: secret}, "no receiver URLs"},
		"short secret":    {webhook.Options{URLs: []string{"https://a.example"}, Secret: []byte("short")}, "5 bytes; at least 24"},
		"ftp":             {webhook.Options{URLs: []string{"ftp://a.example/x"}, Secret: secret}, "receiver 1: ftp://a.example/…: only http and https"},
		"no host":         {webhook.Options{URLs: []string{"https:///x"}, Secret: secret}, "no host"},
		"relative":        {webhook.Options{URLs: []string{"/hooks"}, Secret: secret}, "only http and https"},
		"fragment":        {webhook.Options{URLs: []string{"https://a.example/h#x"}, Secret: secret}, "fragment"},
		"twice":           {webhook.Options{URLs: []string{"https://a.example/h", " https://a.example/h"}, Secret: secret}, "receiver 2 (https://a.example/…) is listed twice"},
		"links no base":   {webhook.Options{URLs: []string{"https://a.example"}, Secret: secret, Links: signer}, "links need the gateway's URL: no gateway URL"},
		"links bad base":  {webhook.Options{URLs: []string{"https://a.example"}, Secret: secret, Links: signer, GatewayURL: "tollgate:8080"}, "not an http or https URL"},
		"base with query": {webhook.Options{URLs: []string{"https://a.example"}, Secret: secret, Links: signer, GatewayURL: "https://g.example/?a=b"}, "plain base URL"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := webhook.New(tc.o)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
