// Package webhook delivers Tollgate's outgoing events (a call starts
// waiting, a decision is applied, a turn ends) to operator-configured URLs,
// signed per the Standard Webhooks spec.
//
// Delivery is an activity, so Temporal's retry policy makes it durable: a
// receiver that is down for hours gets the event when it comes back, under
// the same webhook-id it would have had the first time. The turn builds
// the Event (with a deterministic ID) and starts workflows.DeliveryWorkflow
// for it; Deliver signs and sends it.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/results"
)

// Event types.
const (
	TypeCallWaiting = "call.waiting"
	TypeCallDecided = "call.decided"
	// TypeCallEscalated: a call an approval rule sent for approval went
	// unanswered for the rule's escalate.after; the card says who may
	// answer now (docs/approvals.md).
	TypeCallEscalated = "call.escalated"
	TypeTurnEnded     = "turn.ended"
	// TypeTurnBudgetReached: the turn reached its budget and waits for a
	// person; the card is its budget wait.
	TypeTurnBudgetReached = "turn.budget_reached"
)

// DeliverName is the activity type of Deliverer.Deliver.
const DeliverName = "DeliverWebhook"

// Application error types Deliver fails with.
const (
	// ErrTypeDeliveryFailed: a receiver did not answer 2xx; retryable.
	ErrTypeDeliveryFailed = "WebhookDeliveryFailed"
	// ErrTypeReceiverGone: every receiver has the event except those that
	// answered 410 Gone, which asks senders to stop; not retryable.
	ErrTypeReceiverGone = "WebhookReceiverGone"
	// ErrTypeBadEvent: the event cannot be sent as it is; not retryable.
	ErrTypeBadEvent = "WebhookBadEvent"
)

const (
	// MaxText bounds a turn.ended event's final text: receivers are chat
	// channels and ticket systems, not transcript stores.
	MaxText = 4 << 10
	// MinSecretLen is the Standard Webhooks spec's shortest secret.
	MinSecretLen = 24
	// DefaultTimeout bounds one request to one receiver.
	DefaultTimeout = 10 * time.Second
	// DefaultLinkTTL is how long the links of a call.waiting event work.
	DefaultLinkTTL = 24 * time.Hour
	// DefaultLinkBy is the principal a link's decision is recorded as.
	DefaultLinkBy = "link"
	// maxIDLen bounds the webhook-id header; it matches Temporal's default
	// limit on workflow ids, which event ids also serve as.
	maxIDLen = 1000
	// maxRetryAfter caps how long a receiver's Retry-After may defer the
	// next attempt; the retry policy's own backoff applies beyond it.
	maxRetryAfter = time.Hour
	// drainLimit is how much of a response body is read (and discarded)
	// so the connection can be reused; receivers' bodies are never kept.
	drainLimit = 64 << 10
)

// Event is what the workflow hands the activity.
type Event struct {
	// ID is the webhook-id: deterministic, set by the workflow (e.g.
	// "<turn>/call.waiting/<call>/<n>"), so a redelivery carries the same
	// id and receivers can drop duplicates.
	ID   string `json:"id"`
	Type string `json:"type"`
	Turn string `json:"turn_id"`
	// Run is the run id of the turn's execution that emitted the event;
	// workflows.DeliveryWorkflow fills it from its parent when the
	// workflow did not. A call.waiting event's links are bound to it
	// (signedtoken.LinkClaims.Run), and an event without it (scheduled
	// before it existed) carries none.
	Run  string `json:"run_id,omitempty"`
	User string `json:"user,omitempty"`
	// ParentTurn and ParentCall name the turn and the call that ran this
	// turn's agent as a tool; empty for a turn nobody called.
	ParentTurn string        `json:"parent_turn_id,omitempty"`
	ParentCall string        `json:"parent_call_id,omitempty"`
	Card       *results.Card `json:"card,omitempty"`   // call.waiting, call.decided
	Status     string        `json:"status,omitempty"` // turn.ended: the turn's final status
	Text       string        `json:"text,omitempty"`   // turn.ended: final text, bounded by MaxText
	At         time.Time     `json:"at"`               // workflow time of the event
}

func (e Event) validate() error {
	if e.ID == "" {
		return errors.New("the event has no id")
	}
	if len(e.ID) > maxIDLen {
		return fmt.Errorf("the event id is %d bytes; at most %d fit a webhook-id", len(e.ID), maxIDLen)
	}
	// The id travels in a header: UTF-8 without control characters.
	if !utf8.ValidString(e.ID) || strings.ContainsFunc(e.ID, unicode.IsControl) {
		return errors.New("the event id must be UTF-8 without control characters to travel as a webhook-id")
	}
	if e.Turn == "" {
		return errors.New("the event names no turn")
	}
	if e.At.IsZero() {
		return errors.New("the event has no time")
	}
	switch e.Type {
	case TypeCallWaiting, TypeCallDecided, TypeCallEscalated, TypeTurnBudgetReached:
		if e.Card == nil || e.Card.CallID == "" {
			return fmt.Errorf("a %s event needs the call's card", e.Type)
		}
	case TypeTurnEnded:
		if e.Status == "" {
			return errors.New("a turn.ended event needs the turn's status")
		}
	default:
		return fmt.Errorf("unknown event type %q", e.Type)
	}
	return nil
}

// Payload is the JSON body receivers get, in the Standard Webhooks shape:
// the type, when the event happened (not when it was sent; that is the
// webhook-timestamp header), and the event's data.
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      Data      `json:"data"`
}

// Data is an event's content.
type Data struct {
	Turn string `json:"turn_id"`
	// Run is the run id of the turn's execution that emitted the event;
	// workflows.DeliveryWorkflow fills it from its parent when the
	// workflow did not. A call.waiting event's links are bound to it
	// (signedtoken.LinkClaims.Run), and an event without it (scheduled
	// before it existed) carries none.
	Run    string        `json:"run_id,omitempty"`
	User   string        `json:"user,omitempty"`
	Card   *results.Card `json:"card,omitempty"`
	Status string        `json:"status,omitempty"`
	Text   string        `json:"text,omitempty"`
	// Links are set on call.waiting, for a call pending approval or
	// waiting for a connection, when the deliverer has a link signer.
	Links *Links `json:"links,omitempty"`
}

// Links are the signed gateway URLs of a call.waiting event. Approve and
// Deny are one-click decisions (GET /v1/links/{token}): GET shows a
// confirmation page, its POST applies the decision.
type Links struct {
	Approve string `json:"approve,omitempty"`
	Deny    string `json:"deny,omitempty"`
	// Connect is set on call.waiting for a call of a user waiting for a
	// connection: the gateway page that starts the provider's OAuth flow
	// (GET /v1/connect/{token}). It works only for the call's user,
	// signed in to the gateway.
	Connect string `json:"connect,omitempty"`
}

// Options configure a Deliverer.
type Options struct {
	// URLs are the receivers; each gets every event.
	URLs []string
	// Secret signs events (Standard Webhooks); receivers verify with it.
	Secret []byte
	// Links signs the links of call.waiting events, under the link secret
	// the gateway verifies them with: approve/deny links for a call
	// pending approval, a connect link for one waiting for a connection.
	// Nil sends events without links.
	Links *signedtoken.Signer
	// GatewayURL is the base of the links: <GatewayURL>/v1/links/<token>
	// and <GatewayURL>/v1/connect/<token>. Required with Links.
	GatewayURL string
	// LinkTTL is how long a link works after its event; DefaultLinkTTL if zero.
	LinkTTL time.Duration
	// LinkBy is the principal link decisions are recorded as; DefaultLinkBy
	// if empty.
	LinkBy string
	// Timeout bounds one request to one receiver; DefaultTimeout if zero.
	Timeout time.Duration
	// HTTPClient sends the requests; a copy is used that never follows
	// redirects. http.DefaultClient's settings if nil.
	HTTPClient *http.Client
}

// Deliverer holds what the activity needs. Register Deliver under
// DeliverName (Register does).
type Deliverer struct {
	receivers []receiver
	signer    *standardwebhooks.Webhook
	secret    []byte
	links     *signedtoken.Signer
	gateway   string
	linkTTL   time.Duration
	linkBy    string
	timeout   time.Duration
	client    *http.Client
	// now is the clock of the webhook-timestamp header; tests replace it.
	now func() time.Time
}

type receiver struct {
	url string
	// key names the receiver in heartbeat details: a hash, because
	// receiver URLs often carry a secret and heartbeat details end up in
	// history.
	key string
	// name is how errors and logs show the receiver: scheme and host only,
	// for the same reason.
	name string
}

// New checks o and returns a Deliverer.
func New(o Options) (*Deliverer, error) {
	if len(o.URLs) == 0 {
		return nil, errors.New("webhook: no receiver URLs")
	}
	if len(o.Secret) < MinSecretLen {
		return nil, fmt.Errorf("webhook: the signing secret is %d bytes; at least %d are needed", len(o.Secret), MinSecretLen)
	}
	d := &Deliverer{
		secret:  bytes.Clone(o.Secret),
		links:   o.Links,
		linkTTL: o.LinkTTL,
		linkBy:  o.LinkBy,
		timeout: o.Timeout,
		now:     time.Now,
	}
	seen := map[string]bool{}
	for i, raw := range o.URLs {
		u, err := parseReceiver(raw)
		if err != nil {
			return nil, fmt.Errorf("webhook: receiver %d: %w", i+1, err)
		}
		s := u.String()
		if seen[s] {
			return nil, fmt.Errorf("webhook: receiver %d (%s) is listed twice", i+1, redact(u))
		}
		seen[s] = true
		sum := sha256.Sum256([]byte(s))
		d.receivers = append(d.receivers, receiver{url: s, key: base64.RawURLEncoding.EncodeToString(sum[:12]), name: redact(u)})
	}
	d.signer, _ = standardwebhooks.NewWebhookRaw(d.secret) // never fails
	if o.Links != nil {
		g, err := parseGateway(o.GatewayURL)
		if err != nil {
			return nil, fmt.Errorf("webhook: links need the gateway's URL: %w", err)
		}
		d.gateway = g
	}
	if d.linkTTL <= 0 {
		d.linkTTL = DefaultLinkTTL
	}
	if d.linkBy == "" {
		d.linkBy = DefaultLinkBy
	}
	if d.timeout <= 0 {
		d.timeout = DefaultTimeout
	}
	c := http.Client{}
	if o.HTTPClient != nil {
		c = *o.HTTPClient
	}
	// A receiver's redirect could point anywhere, including the worker's
	// own network; the 3xx counts as a failed delivery instead.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	d.client = &c
	return d, nil
}

// progress is the heartbeat detail: the receivers (by key) this activity
// is done with, so a retry sends only to the rest.
type progress struct {
	Delivered []string `json:"delivered,omitempty"`
	// Gone answered 410 and are not sent to again.
	Gone []string `json:"gone,omitempty"`
}

// Deliver sends e to every receiver that does not have it yet. It fails
// retryably while any receiver fails (naming each, with its status), and
// not retryably when the event is malformed or the only failures left are
// receivers that answered 410 Gone.
//
// Status handling, per receiver: 2xx is delivered; 410 Gone stops
// delivery to that receiver (the spec's way for a receiver to unsubscribe);
// everything else, 3xx and 4xx included, is retried with the policy's
// backoff, because a receiver's misconfiguration (401 after a key change,
// 404 during a deploy) is often fixed within the hours the policy retries
// for, and the retries cost the receiver nothing. A Retry-After on 429 or
// 503 sets the next attempt's delay, up to an hour.
func (d *Deliverer) Deliver(ctx context.Context, e Event) error {
	if err := e.validate(); err != nil {
		return temporal.NewNonRetryableApplicationError("webhook event not sent: "+err.Error(), ErrTypeBadEvent, nil)
	}
	body, err := d.body(e)
	if err != nil {
		return temporal.NewNonRetryableApplicationError("webhook event not sent: "+err.Error(), ErrTypeBadEvent, nil)
	}

	var done progress
	if activity.HasHeartbeatDetails(ctx) {
		// Unreadable details (from a different version) only cost a
		// duplicate, which receivers drop by webhook-id.
		_ = activity.GetHeartbeatDetails(ctx, &done)
	}
	logger := activity.GetLogger(ctx)

	var pending []receiver
	for _, r := range d.receivers {
		if !slices.Contains(done.Delivered, r.key) && !slices.Contains(done.Gone, r.key) {
			pending = append(pending, r)
		}
	}
	var (
		mu       sync.Mutex // guards done, failures, retryIn
		wg       sync.WaitGroup
		failures []string
		retryIn  time.Duration
	)
	for _, r := range pending {
		wg.Go(func() {
			status, after, err := d.send(ctx, r, e.ID, body)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && status/100 == 2:
				done.Delivered = append(done.Delivered, r.key)
				activity.RecordHeartbeat(ctx, done)
			case err == nil && status == http.StatusGone:
				done.Gone = append(done.Gone, r.key)
				activity.RecordHeartbeat(ctx, done)
				logger.Warn("Webhook receiver answered 410 Gone; this event is not sent to it again", "receiver", r.name, "webhook-id", e.ID)
			case err != nil:
				failures = append(failures, fmt.Sprintf("%s: %v", r.name, err))
			default:
				msg := fmt.Sprintf("%s answered %d %s", r.name, status, http.StatusText(status))
				if status/100 == 3 {
					msg += " (redirects are not followed; configure the final URL)"
				}
				failures = append(failures, msg)
				retryIn = max(retryIn, after)
			}
		})
	}
	wg.Wait()

	if len(failures) > 0 {
		slices.Sort(failures)
		return temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("webhook %s not delivered: %s", e.ID, strings.Join(failures, "; ")),
			ErrTypeDeliveryFailed, temporal.ApplicationErrorOptions{NextRetryDelay: retryIn})
	}
	// Success means every receiver has the event; one that unsubscribed
	// (in this attempt or an earlier one) is worth a failed activity the
	// operator can see, but not a retry.
	var gone []string
	for _, r := range d.receivers {
		if slices.Contains(done.Gone, r.key) {
			gone = append(gone, r.name+" answered 410 Gone")
		}
	}
	if len(gone) > 0 {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("webhook %s not delivered: %s", e.ID, strings.Join(gone, "; ")), ErrTypeReceiverGone, nil)
	}
	return nil
}

// send POSTs body to one receiver and reports its status and, for 429 and
// 503, how long it asked us to wait. The error is ours or the network's,
// never the receiver's words.
func (d *Deliverer) send(ctx context.Context, r receiver, id string, body []byte) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, fmt.Errorf("building the request: %w", err)
	}
	// The webhook-timestamp is when this attempt is sent: receivers refuse
	// stale ones, so a redelivery hours later must carry a fresh one.
	now := d.now()
	sig, err := d.signer.Sign(id, now, body)
	if err != nil {
		return 0, 0, fmt.Errorf("signing: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Tollgate-Webhooks/1")
	req.Header.Set(standardwebhooks.HeaderWebhookID, id)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, 0, describeNetError(ctx, err, d.timeout)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	var after time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		after = retryAfter(resp.Header.Get("Retry-After"), now)
	}
	return resp.StatusCode, after, nil
}

// describeNetError says what went wrong without the URL (which Go's
// url.Error repeats in full, secrets included).
func describeNetError(ctx context.Context, err error, timeout time.Duration) error {
	if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// retryAfter reads a Retry-After header in seconds or as an HTTP date,
// capped at maxRetryAfter; zero when absent or unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
		d = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// body builds the signed JSON. It depends only on e and the deliverer's
// keys, so every attempt to every receiver sends the same bytes and the
// same links.
func (d *Deliverer) body(e Event) ([]byte, error) {
	data := Data{Turn: e.Turn, User: e.User, Status: e.Status}
	if e.Card != nil {
		c := *e.Card
		if c.Failure != nil {
			// Detail is for operators reading the turn, not for the chat
			// channel or ticket a receiver posts to; Ref still finds it.
			f := *c.Failure
			f.Detail = ""
			c.Failure = &f
		}
		data.Card = &c
	}
	if e.Text != "" {
		data.Text, _ = results.Truncate(e.Text, results.Limits{MaxBytes: MaxText})
	}
	// A link without its run would be refused by the gateway.
	if e.Type == TypeCallWaiting && e.Card.State == results.StatePendingApproval && d.links != nil && e.Run != "" {
		l, err := d.makeLinks(e)
		if err != nil {
			return nil, err
		}
		data.Links = l
	}
	if e.Type == TypeCallWaiting && e.Card.State == results.StateWaitingConnection && e.Card.Connection != nil && e.User != "" && d.links != nil {
		token, err := d.links.SignConnect(signedtoken.ConnectClaims{
			Turn: e.Turn, Call: e.Card.CallID, User: e.User, Provider: e.Card.Connection.Provider,
			Expires: e.At.Add(d.linkTTL), ID: d.linkID(e.ID, "connect"),
		})
		if err != nil {
			return nil, fmt.Errorf("signing the connect link: %w", err)
		}
		data.Links = &Links{Connect: d.gateway + "/v1/connect/" + token}
	}
	return json.Marshal(Payload{Type: e.Type, Timestamp: e.At.UTC(), Data: data})
}

func (d *Deliverer) makeLinks(e Event) (*Links, error) {
	claims := signedtoken.LinkClaims{
		Turn:     e.Turn,
		Run:      e.Run,
		Call:     e.Card.CallID,
		ArgsHash: signedtoken.ArgsHash(e.Card.EffectiveArguments()),
		By:       d.linkBy,
		// From the event's time, not the attempt's: a link should not
		// live longer because its receiver was down.
		Expires: e.At.Add(d.linkTTL),
	}
	var l Links
	for _, k := range []struct {
		kind results.DecisionKind
		dst  *string
	}{{results.DecisionApprove, &l.Approve}, {results.DecisionDeny, &l.Deny}} {
		c := claims
		c.Decision = k.kind
		c.ID = d.linkID(e.ID, k.kind)
		token, err := d.links.SignLink(c)
		if err != nil {
			return nil, fmt.Errorf("signing the %s link: %w", k.kind, err)
		}
		*k.dst = d.gateway + "/v1/links/" + token
	}
	return &l, nil
}

// linkID derives a link's id from the event, so every attempt and every
// receiver carries the same link (one Update id: the first click wins).
// It is keyed so that link ids, and so Update ids, cannot be predicted
// from the event id alone.
func (d *Deliverer) linkID(eventID string, kind results.DecisionKind) string {
	h := hmac.New(sha256.New, d.secret)
	h.Write([]byte("tollgate webhook link id\x00"))
	h.Write([]byte(eventID))
	h.Write([]byte{0})
	h.Write([]byte(kind))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

func parseReceiver(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		// url.Parse quotes the input, which may hold a secret.
		return nil, errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%s: only http and https URLs can receive webhooks", redact(u))
	}
	if u.Host == "" {
		return nil, errors.New("the URL has no host")
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("%s: a URL fragment is never sent; remove it", redact(u))
	}
	return u, nil
}

func parseGateway(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("no gateway URL is set")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http or https URL", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q: the gateway URL must be a plain base URL (no user, query or fragment)", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// redact shows a receiver as scheme://host/…: enough to find it in the
// configuration, without the path or query where hook URLs keep tokens.
func redact(u *url.URL) string {
	s := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		s += "/…"
	}
	return s
}
