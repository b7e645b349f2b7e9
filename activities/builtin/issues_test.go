package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

const testToken = "ghp_t0ps3cr3tT0k3n"

// fakeGitHub answers the issues endpoint the way api.github.com does, for
// the one token it knows.
func fakeGitHub(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`)
			return
		}
		require.Equal(t, "application/vnd.github+json", r.Header.Get("Accept"))
		switch r.URL.Path {
		case "/repos/acme/widgets/issues":
			require.Equal(t, "open", r.URL.Query().Get("state"))
			fmt.Fprint(w, `[
				{"number": 7, "title": "Crash on start", "state": "open", "html_url": "https://github.com/acme/widgets/issues/7",
				 "user": {"login": "bob"}, "labels": [{"name": "bug"}, {"name": "p1"}]},
				{"number": 8, "title": "Add dark mode", "state": "open", "html_url": "https://github.com/acme/widgets/pull/8",
				 "user": {"login": "carol"}, "pull_request": {"url": "x"}},
				{"number": 9, "title": "Docs typo", "state": "open", "html_url": "https://github.com/acme/widgets/issues/9",
				 "user": {"login": "dan"}, "labels": []}
			]`)
		case "/repos/acme/hostile/issues":
			fmt.Fprint(w, `[
				{"number": 1, "title": "Click", "state": "open", "html_url": "javascript:alert(document.cookie)"},
				{"number": 2, "title": "Fine", "state": "open", "html_url": "https://github.com/acme/hostile/issues/2"}
			]`)
		case "/repos/acme/empty/issues":
			fmt.Fprint(w, `[]`)
		case "/repos/acme/echo/issues":
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(w, `{"message":"token %s is not allowed here"}`, testToken)
		case "/repos/acme/down/issues":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"Not Found"}`)
		}
	}))
}

func TestListIssuesConnectionFlow(t *testing.T) {
	srv := fakeGitHub(t)
	defer srv.Close()
	store := connections.NewMemoryStore()
	li := testTools(t, Options{HTTPClient: srv.Client(), GitHubBaseURL: srv.URL, Connections: store})[ListIssues]
	call := tool.Call{User: "alice"}
	args := listIssuesArgs{Owner: "acme", Repo: "widgets"}

	// First run: no connection yet, so the turn must wait for one.
	out := run(t, li, call, args)
	require.Equal(t, results.NeedConnection("github", githubHint, "repo"), out)

	// The person says "connected" without having stored anything: ask again.
	call.Resume = &tool.Resume{Decision: results.DecisionConnected}
	out = run(t, li, call, args)
	require.Equal(t, results.KindConnectionRequired, out.Kind)

	// They connect for real; the re-run proceeds.
	require.NoError(t, store.Put(context.Background(), connections.Credential{Provider: "github", User: "alice", Token: testToken, Scopes: []string{"repo"}}))
	out = run(t, li, call, args)
	require.Equal(t, "2 open issues in acme/widgets:\n#7 Crash on start [open] (labels: bug, p1) by bob\n#9 Docs typo [open] by dan", requireText(t, out))
	require.Equal(t, []results.Source{
		{URL: "https://github.com/acme/widgets/issues/7", Title: "acme/widgets#7 Crash on start"},
		{URL: "https://github.com/acme/widgets/issues/9", Title: "acme/widgets#9 Docs typo"},
	}, out.Success.Sources)
	requireNoToken(t, out, nil)

	// Another user's connection is theirs alone.
	out = run(t, li, tool.Call{User: "mallory"}, args)
	require.Equal(t, results.KindConnectionRequired, out.Kind)
}

func TestListIssuesResponses(t *testing.T) {
	srv := fakeGitHub(t)
	defer srv.Close()
	store := connections.NewMemoryStore()
	ctx := context.Background()
	require.NoError(t, store.Put(ctx, connections.Credential{Provider: "github", User: "alice", Token: testToken}))
	require.NoError(t, store.Put(ctx, connections.Credential{Provider: "github", User: "eve", Token: "ghp_revoked"}))
	li := testTools(t, Options{HTTPClient: srv.Client(), GitHubBaseURL: srv.URL + "/", Connections: store})[ListIssues]

	tests := []struct {
		name      string
		user      string
		args      listIssuesArgs
		resume    *tool.Resume
		wantText  string
		wantErr   string
		retryable bool
	}{
		{name: "no issues", user: "alice", args: listIssuesArgs{Owner: "acme", Repo: "empty"}, wantText: "acme/empty has no open issues"},
		{name: "revoked token", user: "eve", args: listIssuesArgs{Owner: "acme", Repo: "widgets"}, wantErr: "HTTP 401"},
		{name: "unknown repo", user: "alice", args: listIssuesArgs{Owner: "acme", Repo: "nope"}, wantErr: "acme/nope was not found"},
		{name: "error echoing the token", user: "alice", args: listIssuesArgs{Owner: "acme", Repo: "echo"}, wantErr: "token [redacted] is not allowed"},
		{name: "server down", user: "alice", args: listIssuesArgs{Owner: "acme", Repo: "down"}, retryable: true},
		{name: "path in owner", user: "alice", args: listIssuesArgs{Owner: "../admin", Repo: "x"}, wantErr: "must be GitHub names"},
		{name: "slash in repo", user: "alice", args: listIssuesArgs{Owner: "acme", Repo: "a/b"}, wantErr: "must be GitHub names"},
		{name: "bad state", user: "alice", args: listIssuesArgs{Owner: "acme", Repo: "widgets", State: "merged"}, wantErr: "state \"merged\""},
		{name: "declined", user: "alice", args: listIssuesArgs{Owner: "acme", Repo: "widgets"}, resume: &tool.Resume{Decision: results.DecisionDeny}, wantErr: "did not connect GitHub"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runErr(t, li, tool.Call{User: tt.user, Resume: tt.resume}, tt.args)
			requireNoToken(t, out, err)
			if tt.retryable {
				require.Error(t, err)
				require.True(t, tool.IsRetryable(err))
				return
			}
			require.NoError(t, err)
			if tt.wantErr != "" {
				requireToolError(t, out, tt.wantErr)
				return
			}
			require.Equal(t, tt.wantText, requireText(t, out))
		})
	}

	t.Run("no user", func(t *testing.T) {
		_, err := runErr(t, li, tool.Call{}, listIssuesArgs{Owner: "acme", Repo: "widgets"})
		require.ErrorContains(t, err, "no user")
	})
}

func requireNoToken(t *testing.T, out results.Outcome, err error) {
	t.Helper()
	requireNoSecret(t, out, err, testToken)
}

// requireNoSecret looks for token in every form it can take: raw in any
// string of the outcome, JSON-escaped with and without encoding/json's
// HTML escaping, HTML-escaped and percent-encoded.
func requireNoSecret(t *testing.T, out results.Outcome, err error, token string) {
	t.Helper()
	forms := []string{token, jsonEscaped(token, true), jsonEscaped(token, false), html.EscapeString(token), url.QueryEscape(token), url.PathEscape(token)}
	if err != nil {
		for _, f := range forms {
			require.NotContains(t, err.Error(), f)
		}
		return
	}
	raw, mErr := json.Marshal(out)
	require.NoError(t, mErr)
	var tree any
	require.NoError(t, json.Unmarshal(raw, &tree))
	texts := []string{string(raw)}
	var collect func(v any)
	collect = func(v any) {
		switch v := v.(type) {
		case string:
			texts = append(texts, v)
		case []any:
			for _, e := range v {
				collect(e)
			}
		case map[string]any:
			for k, e := range v {
				texts = append(texts, k)
				collect(e)
			}
		}
	}
	collect(tree)
	for _, text := range texts {
		for _, f := range forms {
			require.NotContains(t, strings.ToLower(text), strings.ToLower(f))
		}
	}
}

// TestListIssuesRedactsAwkwardToken: a token with characters that
// encoding/json escapes is still found, however the server echoed it.
func TestListIssuesRedactsAwkwardToken(t *testing.T) {
	const token = `ghp_<a>&"b\c'd`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "Bearer "+token, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		type issue struct {
			Number  int    `json:"number"`
			Title   string `json:"title"`
			State   string `json:"state"`
			HTMLURL string `json:"html_url"`
			User    struct {
				Login string `json:"login"`
			} `json:"user"`
			Labels []struct {
				Name string `json:"name"`
			} `json:"labels"`
		}
		switch r.URL.Path {
		case "/repos/acme/echo/issues":
			// Every spelling at once, in every field the tool shows.
			is := issue{Number: 1, State: "open",
				Title:   "raw " + token + " html " + html.EscapeString(token) + " json " + jsonEscaped(token, false),
				HTMLURL: "https://github.com/acme/echo/issues/1?q=" + url.QueryEscape(token) + "&p=" + url.PathEscape(token)}
			is.User.Login = token
			is.Labels = []struct {
				Name string `json:"name"`
			}{{Name: strings.ToUpper(url.QueryEscape(token))}, {Name: jsonEscaped(token, true)}}
			require.NoError(t, json.NewEncoder(w).Encode([]issue{is}))
		case "/repos/acme/error/issues":
			w.WriteHeader(http.StatusUnprocessableEntity)
			require.NoError(t, json.NewEncoder(w).Encode(map[string]string{"message": "token " + token + " is not allowed"}))
		case "/repos/acme/text/issues":
			// Not JSON: the body is shown as text, escapes and all.
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `bad {"token": "%s"} or %s`, jsonEscaped(token, true), html.EscapeString(token))
		}
	}))
	defer srv.Close()
	store := connections.NewMemoryStore()
	require.NoError(t, store.Put(context.Background(), connections.Credential{Provider: "github", User: "alice", Token: token}))
	li := testTools(t, Options{HTTPClient: srv.Client(), GitHubBaseURL: srv.URL, Connections: store})[ListIssues]

	for _, repo := range []string{"echo", "error", "text"} {
		t.Run(repo, func(t *testing.T) {
			out, err := runErr(t, li, tool.Call{User: "alice"}, listIssuesArgs{Owner: "acme", Repo: repo})
			require.NoError(t, err)
			requireNoSecret(t, out, nil, token)
			raw, err := json.Marshal(out)
			require.NoError(t, err)
			require.Contains(t, string(raw), "[redacted]")
		})
	}
}

// The issues API chooses each issue's URL; one that is not http(s) is no
// source (a card would link it), and the rest of the list still comes.
func TestListIssuesLeavesOutLinksThatAreNotHTTP(t *testing.T) {
	srv := fakeGitHub(t)
	defer srv.Close()
	store := connections.NewMemoryStore()
	require.NoError(t, store.Put(context.Background(), connections.Credential{Provider: "github", User: "alice", Token: testToken, Scopes: []string{"repo"}}))
	li := testTools(t, Options{HTTPClient: srv.Client(), GitHubBaseURL: srv.URL, Connections: store})[ListIssues]
	out := run(t, li, tool.Call{User: "alice"}, listIssuesArgs{Owner: "acme", Repo: "hostile"})
	require.NoError(t, out.Validate())
	require.Contains(t, requireText(t, out), "#1 Click")
	require.Equal(t, []results.Source{{URL: "https://github.com/acme/hostile/issues/2", Title: "acme/hostile#2 Fine"}}, out.Success.Sources)
}
