package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/activities/connections"
	"github.com/tollgate-dev/tollgate/activities/tool"
	"github.com/tollgate-dev/tollgate/results"
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
	if err != nil {
		require.NotContains(t, err.Error(), testToken)
		return
	}
	raw, mErr := json.Marshal(out)
	require.NoError(t, mErr)
	require.NotContains(t, string(raw), testToken)
}
