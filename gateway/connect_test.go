package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/connections/oauth/oauthtest"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

// The OAuth tests run the whole flow against a real authorization server
// (ory/fosite, in oauthtest) and a real Temporal server, over HTTP with a
// cookie jar standing in for the browser; connect_browser_test.go in
// internal/tests/e2e does the same in Chromium.

func init() {
	scripts["issues"] = tollgatetest.NewModel(
		tollgatetest.Reply("", tollgatetest.Call("i1", "list_repo_issues", map[string]string{"owner": "acme", "repo": "shop"})),
		tollgatetest.Reply("Two issues are open."),
	)
}

// issuesTool lists issues from the test provider's API with the user's
// stored token, asking for a connection when there is none or the API
// refuses it.
func issuesTool(store connections.Store, api string) tool.Tool {
	return tool.MustFunc(tool.Spec{Name: "list_repo_issues", Description: "List a repository's issues.", Idempotent: true},
		func(ctx context.Context, call tool.Call, args struct {
			Owner string `json:"owner"`
			Repo  string `json:"repo"`
		}) (results.Outcome, error) {
			need := results.NeedConnection("github", "Connect your account through the link.", "repo")
			if call.Resume != nil && call.Resume.Decision != results.DecisionConnected {
				return results.FailTool("the user did not connect"), nil
			}
			cred, err := store.Get(ctx, call.User, "github")
			if errors.Is(err, connections.ErrNotConnected) {
				return need, nil
			}
			if err != nil {
				return results.Outcome{}, err
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/repos/%s/%s/issues", api, args.Owner, args.Repo), nil)
			req.Header.Set("Authorization", "Bearer "+cred.Token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return results.Outcome{}, err
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return need, nil
			}
			var issues []struct {
				Number int    `json:"number"`
				Title  string `json:"title"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&issues); err != nil {
				return results.Outcome{}, err
			}
			var lines []string
			for _, is := range issues {
				lines = append(lines, fmt.Sprintf("#%d %s", is.Number, is.Title))
			}
			return results.SucceedText(strings.Join(lines, "\n")), nil
		})
}

// oauthEnv is env with OAuth: a provider, a token store shared by the
// worker's tool (through the refreshing store) and the gateway.
type oauthEnv struct {
	*env
	idp     *oauthtest.Server
	store   *connections.FileStore
	ps      *oauth.Providers
	logs    *syncBuffer
	connect *gateway.ConnectOptions
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type oauthEnvOptions struct {
	tokenLifespan time.Duration
	stateTTL      time.Duration
}

func newOAuthEnv(t *testing.T, o oauthEnvOptions) *oauthEnv {
	t.Helper()
	hostPort, ns := sharedServer(t)
	n := seq.Add(1)
	e := &oauthEnv{env: &env{t: t, name: fmt.Sprintf("oa%d", n), hostPort: hostPort, ns: ns, tq: fmt.Sprintf("oauth-test-%d", n), data: t.TempDir()}, logs: &syncBuffer{}}
	e.caller = e.dial()
	var err error
	e.keys, err = apikey.NewSet()
	require.NoError(t, err)

	// The gateway's address must be known before the provider (its
	// redirect URI) and the gateway (the provider) exist.
	var handler http.Handler = http.NotFoundHandler()
	e.http = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	base := "http://" + e.http.Listener.Addr().String()
	e.idp, err = oauthtest.Start(oauthtest.Options{RedirectURIs: []string{base + oauth.CallbackPath}, AccessTokenLifespan: o.tokenLifespan})
	require.NoError(t, err)
	t.Cleanup(e.idp.Close)
	secretFile := t.TempDir() + "/github.secret"
	require.NoError(t, writeFile(secretFile, e.idp.ClientSecret()+"\n"))
	e.ps, err = oauth.New(context.Background(), oauth.Config{RedirectBase: base, Providers: []oauth.ProviderConfig{{
		ID: "github", ClientID: e.idp.ClientID(), Issuer: e.idp.URL, Scopes: []string{"repo"},
	}}}, oauth.LoadOptions{Getenv: func(k string) string {
		if k == oauth.SecretEnv("github") {
			return secretFile
		}
		return ""
	}})
	require.NoError(t, err)
	e.store, err = connections.NewFileStore(t.TempDir())
	require.NoError(t, err)
	e.signer, err = signedtoken.NewSigner([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	e.connect = &gateway.ConnectOptions{Providers: e.ps, Store: e.store, StateTTL: o.stateTTL}
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.srv, err = gateway.New(gateway.Options{
		Temporal: e.caller, TaskQueue: e.tq, Keys: e.keys, Links: e.signer, RespondTimeout: 10 * time.Second, Logger: logger, Connect: e.connect,
	})
	require.NoError(t, err)
	handler = e.srv
	e.http.Start()
	t.Cleanup(e.http.Close)

	refreshing := oauth.NewStore(e.store, e.ps)
	refreshing.Logger = logger
	refreshing.Margin = 500 * time.Millisecond
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		DataDir: e.data, Workspace: t.TempDir(), NoBuiltins: true,
		Tools:            []tool.Tool{issuesTool(refreshing, e.idp.APIURL())},
		Providers:        map[string]tollgate.Provider{"gw": scriptProvider{}},
		SearchAttributes: true,
		Connections:      refreshing,
	})
	require.NoError(t, err)
	w := worker.New(e.dial(), e.tq, worker.Options{Plugins: []worker.Plugin{plugin}, WorkerStopTimeout: 100 * time.Millisecond})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	e.worker = w
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		for _, id := range e.turns {
			_ = e.caller.TerminateWorkflow(ctx, id, "", "test over")
		}
	})
	return e
}

func writeFile(path, s string) error {
	return os.WriteFile(path, []byte(s), 0o600)
}

// parkIssues starts a turn for user whose tool waits for a connection.
func (e *oauthEnv) parkIssues(user string) string {
	e.t.Helper()
	id := fmt.Sprintf("%s-turn-%d", e.name, seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}.Start(ctx, id, workflows.Input{
		Prompt: "List the open issues of acme/shop", Model: "gw:issues", Tools: []string{"list_repo_issues"}, User: user,
	})
	require.NoError(e.t, err)
	e.turns = append(e.turns, id)
	e.waitState(id, "waiting for a connection", func(s workflows.State) bool {
		return len(s.Cards) == 1 && s.Cards[0].State == results.StateWaitingConnection
	})
	return id
}

// jarBrowser is an HTTP client with cookies that does not follow redirects.
type jarBrowser struct {
	t testing.TB
	c *http.Client
}

func (b jarBrowser) get(u string) response {
	b.t.Helper()
	return doWith(b.t, b.c, "", request{method: http.MethodGet, path: u})
}

func (b jarBrowser) post(u string, form url.Values) response {
	b.t.Helper()
	return doWith(b.t, b.c, "", request{method: http.MethodPost, path: u, body: form.Encode(), header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
}

// login signs the browser in to the inbox with key.
func (e *oauthEnv) login(key string) jarBrowser {
	e.t.Helper()
	b := jarBrowser{t: e.t, c: browserClient(e.t)}
	r := b.get(e.http.URL + "/inbox")
	r = b.post(e.http.URL+"/inbox/login", url.Values{"csrf": {csrfOf(e.t, r.body)}, "key": {key}})
	require.Equal(e.t, http.StatusSeeOther, r.code, r.body)
	return b
}

// connectLink reads the call's connect link from the API.
func (e *oauthEnv) connectLink(key, id string) string {
	e.t.Helper()
	r := e.do(request{method: http.MethodGet, path: "/v1/turns/" + id, key: key})
	require.Equal(e.t, http.StatusOK, r.code, r.body)
	v := decodeJSON[struct {
		ConnectLinks map[string]string `json:"connect_links"`
	}](e.t, r.body)
	require.Contains(e.t, v.ConnectLinks, "i1", r.body)
	return v.ConnectLinks["i1"]
}

// startFlow opens the connect link, presses Connect, and returns the
// provider's authorize URL the gateway redirected to.
func (e *oauthEnv) startFlow(b jarBrowser, link string) string {
	e.t.Helper()
	r := b.get(link)
	require.Equal(e.t, http.StatusOK, r.code, r.body)
	require.Contains(e.t, r.body, "Connect <b>github</b>")
	r = b.post(link, url.Values{"csrf": {csrfOf(e.t, r.body)}})
	require.Equal(e.t, http.StatusSeeOther, r.code, r.body)
	loc := r.header.Get("Location")
	require.True(e.t, strings.HasPrefix(loc, e.idp.AuthURL()+"?"), loc)
	u, err := url.Parse(loc)
	require.NoError(e.t, err)
	require.Equal(e.t, "S256", u.Query().Get("code_challenge_method"))
	require.NotEmpty(e.t, u.Query().Get("code_challenge"))
	return loc
}

// consent answers the provider's consent page and returns the callback
// URL the provider redirected to.
func (e *oauthEnv) consent(b jarBrowser, authorize, answer string) string {
	e.t.Helper()
	r := b.get(authorize)
	require.Equal(e.t, http.StatusOK, r.code, r.body)
	require.Contains(e.t, r.body, "asks for access")
	u, _ := url.Parse(authorize)
	form := u.Query()
	form.Set("consent", answer)
	r = b.post(e.idp.AuthURL(), form)
	require.Contains(e.t, []int{http.StatusFound, http.StatusSeeOther}, r.code, r.body)
	cb := r.header.Get("Location")
	require.True(e.t, strings.HasPrefix(cb, e.http.URL+oauth.CallbackPath+"?"), cb)
	return cb
}

// TestOAuthConnectResumesTheCall: the flow end to end, then every check
// that must refuse a forged or replayed callback, and revocation.
func TestOAuthConnectResumesTheCall(t *testing.T) {
	e := newOAuthEnv(t, oauthEnvOptions{})
	alice := e.key("alice", apikey.Scopes)
	id := e.parkIssues("alice")
	link := e.connectLink(alice, id)
	require.True(t, strings.HasPrefix(link, e.http.URL+"/v1/connect/"), link)

	// The link alone authorizes nothing: a stranger's browser is asked to
	// sign in, and bob, signed in, is refused.
	stranger := jarBrowser{t: t, c: browserClient(t)}
	r := stranger.get(link)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, `id="continue-link"`)
	r = stranger.get(link + "?continue=1")
	require.Equal(t, http.StatusUnauthorized, r.code, r.body)
	require.Contains(t, r.body, "only alice may do it")
	bob := e.login(e.key("bob", apikey.Scopes))
	r = bob.get(link)
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	require.Contains(t, r.body, "you are signed in as bob")

	b := e.login(alice)
	authorize := e.startFlow(b, link)
	callback := e.consent(b, authorize, "allow")

	// A forged callback: the same code with a state altered by one byte,
	// and the real state from a browser that did not start the flow.
	cu, _ := url.Parse(callback)
	q := cu.Query()
	forged := url.Values{"code": {q.Get("code")}, "state": {tamper(q.Get("state"))}}
	r = b.get(e.http.URL + oauth.CallbackPath + "?" + forged.Encode())
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	require.Contains(t, r.body, "Invalid sign-in answer")
	r = stranger.get(callback)
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	require.Contains(t, r.body, "not started in this browser")

	r = b.get(callback)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, "Connected github")
	s := e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	c := card(t, s, "i1")
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, "alice", c.Decisions[len(c.Decisions)-1].By)
	require.Equal(t, results.DecisionConnected, c.Decisions[len(c.Decisions)-1].Decision)
	require.Contains(t, outputOf(c), "#1 Checkout is slow")

	// A reload applies nothing more.
	r = b.get(callback)
	require.Equal(t, http.StatusConflict, r.code, r.body)
	require.Contains(t, r.body, "already completed")

	cred, err := e.store.Get(context.Background(), "alice", "github")
	require.NoError(t, err)
	require.NotEmpty(t, cred.RefreshToken)
	require.True(t, e.idp.Active(context.Background(), cred.Token))
	e.requireNoToken(id, cred.Token, cred.RefreshToken)

	// Revocation: bob cannot revoke alice's; alice can, and the provider
	// no longer takes the token.
	r = e.do(request{method: http.MethodDelete, path: "/v1/connections/github?user=alice", key: e.key("bob2", apikey.Scopes)})
	require.Equal(t, http.StatusForbidden, r.code, r.body)
	r = e.do(request{method: http.MethodDelete, path: "/v1/connections/github", key: alice})
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.False(t, e.idp.Active(context.Background(), cred.Token), "the provider revoked the token")
	_, err = e.store.Get(context.Background(), "alice", "github")
	require.ErrorIs(t, err, connections.ErrNotConnected)
	r = e.do(request{method: http.MethodDelete, path: "/v1/connections/github", key: alice})
	require.Equal(t, http.StatusNotFound, r.code, r.body)

	// After revocation the tool asks again: connection_required, not an
	// internal error.
	id2 := e.parkIssues("alice")
	s, err = e.state(id2)
	require.NoError(t, err)
	require.Equal(t, results.StateWaitingConnection, card(t, s, "i1").State)
}

// tamper changes one character of the state's payload.
func tamper(s string) string {
	b := []byte(s)
	if b[3] == 'A' {
		b[3] = 'B'
	} else {
		b[3] = 'A'
	}
	return string(b)
}

func outputOf(c results.Card) string {
	b, _ := json.Marshal(c)
	return string(b)
}

// requireNoToken scans the turn's history, its cards, its model messages
// and the gateway's log for the tokens.
func (e *oauthEnv) requireNoToken(id string, tokens ...string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var hist bytes.Buffer
	it := e.caller.GetWorkflowHistory(ctx, id, "", false, 0)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(e.t, err)
		b, err := json.Marshal(ev)
		require.NoError(e.t, err)
		hist.Write(b)
	}
	var res workflows.Result
	require.NoError(e.t, e.caller.GetWorkflow(ctx, id, "").Get(ctx, &res))
	msgs, err := json.Marshal(res)
	require.NoError(e.t, err)
	s, err := e.state(id)
	require.NoError(e.t, err)
	cards, err := json.Marshal(s)
	require.NoError(e.t, err)
	require.NotEmpty(e.t, hist.String())
	for _, tok := range tokens {
		require.NotEmpty(e.t, tok)
		require.NotContains(e.t, hist.String(), tok, "history")
		require.NotContains(e.t, string(msgs), tok, "result and model messages")
		require.NotContains(e.t, string(cards), tok, "cards")
		require.NotContains(e.t, e.logs.String(), tok, "gateway log")
	}
}

// Connect links and states are signed with the link secret: a gateway
// with connections and no link signer could mint none.
func TestConnectNeedsTheLinkSigner(t *testing.T) {
	e := newEnv(t, envOptions{noWorker: true})
	_, err := gateway.New(gateway.Options{Temporal: e.caller, Keys: e.keys, Connect: &gateway.ConnectOptions{}})
	require.ErrorContains(t, err, "Options.Connect needs Options.Links")
}

// TestOAuthRefusals: every way a callback can fail says so, with its
// status, and stores nothing it should not.
func TestOAuthRefusals(t *testing.T) {
	e := newOAuthEnv(t, oauthEnvOptions{})
	alice := e.key("alice", apikey.Scopes)
	b := e.login(alice)

	t.Run("consent denied", func(t *testing.T) {
		id := e.parkIssues("alice")
		cb := e.consent(b, e.startFlow(b, e.connectLink(alice, id)), "deny")
		r := b.get(cb)
		require.Equal(t, http.StatusForbidden, r.code, r.body)
		require.Contains(t, r.body, "You did not grant Tollgate access to github")
		s, err := e.state(id)
		require.NoError(t, err)
		require.Equal(t, results.StateWaitingConnection, card(t, s, "i1").State, "the call still waits")
		_, err = e.store.Get(context.Background(), "alice", "github")
		require.ErrorIs(t, err, connections.ErrNotConnected)
	})

	t.Run("state expired", func(t *testing.T) {
		id := e.parkIssues("alice")
		st, err := e.signer.SignState(signedtoken.ConnectClaims{Turn: id, Call: "i1", User: "alice", Provider: "github", Expires: time.Now().Add(-time.Second)})
		require.NoError(t, err)
		r := b.get(e.http.URL + oauth.CallbackPath + "?code=x&state=" + url.QueryEscape(st))
		require.Equal(t, http.StatusGone, r.code, r.body)
		require.Contains(t, r.body, "Sign-in expired")
	})

	t.Run("connect link of another kind or key", func(t *testing.T) {
		// A state is not a connect link, and a token signed with another
		// key is nobody's.
		st, err := e.signer.SignState(signedtoken.ConnectClaims{Turn: "t", Call: "i1", User: "alice", Provider: "github", Expires: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		r := b.get(e.http.URL + "/v1/connect/" + st)
		require.Equal(t, http.StatusForbidden, r.code, r.body)
		other, err := signedtoken.NewSigner([]byte(strings.Repeat("z", 32)))
		require.NoError(t, err)
		st, err = other.SignConnect(signedtoken.ConnectClaims{Turn: "t", Call: "i1", User: "alice", Provider: "github", Expires: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		r = b.get(e.http.URL + "/v1/connect/" + st)
		require.Equal(t, http.StatusForbidden, r.code, r.body)
		require.Contains(t, r.body, "Invalid link")
	})

	t.Run("provider unknown", func(t *testing.T) {
		tok, err := e.signer.SignConnect(signedtoken.ConnectClaims{Turn: "t", Call: "i1", User: "alice", Provider: "gitlab", Expires: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		r := b.get(e.http.URL + "/v1/connect/" + tok)
		require.Equal(t, http.StatusNotFound, r.code, r.body)
		require.Contains(t, r.body, "Unknown provider")
		require.Contains(t, r.body, "gitlab")
	})

	t.Run("code exchange fails", func(t *testing.T) {
		id := e.parkIssues("alice")
		cb := e.consent(b, e.startFlow(b, e.connectLink(alice, id)), "allow")
		u, _ := url.Parse(cb)
		q := u.Query()
		q.Set("code", "not-the-code")
		r := b.get(e.http.URL + oauth.CallbackPath + "?" + q.Encode())
		require.Equal(t, http.StatusBadGateway, r.code, r.body)
		require.Contains(t, r.body, "Code exchange failed")
		_, err := e.store.Get(context.Background(), "alice", "github")
		require.ErrorIs(t, err, connections.ErrNotConnected)
	})

	t.Run("call stopped waiting meanwhile", func(t *testing.T) {
		id := e.parkIssues("alice")
		cb := e.consent(b, e.startFlow(b, e.connectLink(alice, id)), "allow")
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_, err := tollgate.Client{Temporal: e.caller}.Respond(ctx, id, workflows.Response{CallID: "i1", Decision: results.DecisionCancel, By: "alice"})
		require.NoError(t, err)
		r := b.get(cb)
		require.Equal(t, http.StatusConflict, r.code, r.body)
		require.Contains(t, r.body, "no longer waits")
		cred, err := e.store.Get(context.Background(), "alice", "github")
		require.NoError(t, err, "the token is stored all the same")
		require.True(t, e.idp.Active(context.Background(), cred.Token))
		require.NoError(t, e.store.Delete(context.Background(), "alice", "github"))
	})
}

// TestOAuthRefreshBeforeTheToolRuns: a token past its expiry is refreshed
// with its refresh token before the tool uses it; a refresh the provider
// refuses asks for the connection again.
func TestOAuthRefreshBeforeTheToolRuns(t *testing.T) {
	e := newOAuthEnv(t, oauthEnvOptions{tokenLifespan: 2 * time.Second})
	alice := e.key("alice", apikey.Scopes)
	b := e.login(alice)
	id := e.parkIssues("alice")
	r := b.get(e.consent(b, e.startFlow(b, e.connectLink(alice, id)), "allow"))
	require.Equal(t, http.StatusOK, r.code, r.body)
	e.waitState(id, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	first, err := e.store.Get(context.Background(), "alice", "github")
	require.NoError(t, err)

	// Past expiry (and the refresh margin), the next turn's tool gets a
	// fresh token without anyone connecting again.
	time.Sleep(time.Until(first.Expiry) + time.Second)
	require.False(t, e.idp.Active(context.Background(), first.Token), "the first token expired")
	id2 := fmt.Sprintf("%s-turn-%d", e.name, seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err = tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}.Start(ctx, id2, workflows.Input{Prompt: "again", Model: "gw:issues", Tools: []string{"list_repo_issues"}, User: "alice"})
	require.NoError(t, err)
	e.turns = append(e.turns, id2)
	s := e.waitState(id2, "completed", func(s workflows.State) bool { return s.Status == workflows.StatusCompleted })
	require.Contains(t, outputOf(card(t, s, "i1")), "#2 Refunds lack their order")
	second, err := e.store.Get(context.Background(), "alice", "github")
	require.NoError(t, err)
	require.NotEqual(t, first.Token, second.Token)
	require.Contains(t, e.logs.String(), "Connection refreshed")
	e.requireNoToken(id2, first.Token, second.Token, second.RefreshToken)

	// The grant revoked at the provider (the refresh token with it): the
	// next refresh is refused, and the tool asks for a connection again.
	p, _ := e.ps.Get("github")
	require.NoError(t, p.Revoke(context.Background(), second.RefreshToken, "refresh_token"))
	time.Sleep(time.Until(second.Expiry))
	id3 := e.parkIssues("alice")
	s, err = e.state(id3)
	require.NoError(t, err)
	require.Equal(t, results.StateWaitingConnection, card(t, s, "i1").State)
	_, err = e.store.Get(context.Background(), "alice", "github")
	require.ErrorIs(t, err, connections.ErrNotConnected, "a refused grant is forgotten")
	require.NotContains(t, e.logs.String(), second.RefreshToken)
}
