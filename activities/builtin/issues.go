package builtin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

const (
	githubProvider = "github"
	githubScope    = "repo"
	githubHint     = "Connect a GitHub account: create a token with the repo scope at https://github.com/settings/tokens and register it for your user."
	maxIssuesBody  = 4 << 20
	issuesPerPage  = 50
)

// githubName is what GitHub allows in owner and repository names; it also
// keeps the names from adding path segments to the request URL.
var githubName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

type listIssuesArgs struct {
	Owner string `json:"owner" jsonschema:"repository owner (user or organisation)"`
	Repo  string `json:"repo" jsonschema:"repository name"`
	State string `json:"state,omitempty" jsonschema:"open (default), closed or all"`
}

type githubIssue struct {
	Number      int                     `json:"number"`
	Title       string                  `json:"title"`
	State       string                  `json:"state"`
	HTMLURL     string                  `json:"html_url"`
	User        struct{ Login string }  `json:"user"`
	Labels      []struct{ Name string } `json:"labels"`
	PullRequest json.RawMessage         `json:"pull_request,omitempty"`
}

func listIssuesTool(opts Options) (tool.Tool, error) {
	base := strings.TrimRight(opts.GitHubBaseURL, "/")
	if _, err := url.Parse(base); err != nil {
		return nil, fmt.Errorf("GitHub base URL %q: %w", opts.GitHubBaseURL, err)
	}
	t, err := tool.Func(tool.Spec{
		Name:        ListIssues,
		Description: "List the issues of a GitHub repository (pull requests excluded), using the user's GitHub connection. If the user has not connected GitHub yet, they are asked to.",
		Idempotent:  true,
		Concurrent:  true,
		Timeout:     opts.FetchTimeout + timeoutGrace,
	}, func(ctx context.Context, call tool.Call, args listIssuesArgs) (results.Outcome, error) {
		if !githubName.MatchString(args.Owner) || !githubName.MatchString(args.Repo) || strings.Contains(args.Owner+args.Repo, "..") {
			return results.FailTool("owner %q and repo %q must be GitHub names (letters, digits, '-', '_', '.')", args.Owner, args.Repo), nil
		}
		state := args.State
		if state == "" {
			state = "open"
		}
		if state != "open" && state != "closed" && state != "all" {
			return results.FailTool("state %q must be open, closed or all", args.State), nil
		}
		if r := call.Resume; r != nil && r.Decision != results.DecisionConnected {
			return results.FailTool("the user did not connect GitHub (%s); do not retry without asking them", r.Decision), nil
		}
		if call.User == "" {
			return results.Outcome{}, errors.New("list_issues: the call has no user to look up a GitHub connection for")
		}
		cred, err := opts.Connections.Get(ctx, call.User, githubProvider)
		if errors.Is(err, connections.ErrNotConnected) {
			// Also after a "connected" answer with nothing stored: asking
			// again lets the person finish connecting.
			return results.NeedConnection(githubProvider, githubHint, githubScope), nil
		}
		if err != nil {
			return results.Outcome{}, fmt.Errorf("list_issues: look up GitHub connection: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, opts.FetchTimeout)
		defer cancel()
		out, err := listIssues(ctx, opts.HTTPClient, base, cred.Token, args.Owner, args.Repo, state)
		return redactOutcome(out, err, cred.Token)
	})
	if err != nil {
		return nil, err
	}
	return connectedTool{Tool: t, provider: githubProvider}, nil
}

// connectedTool says which user connection a tool acts through, so a
// remembered grant for it lapses when the user connects again.
type connectedTool struct {
	tool.Tool
	provider string
}

func (t connectedTool) ConnectionProvider() string { return t.provider }

func listIssues(ctx context.Context, client *http.Client, base, token, owner, repo, state string) (results.Outcome, error) {
	endpoint := fmt.Sprintf("%s/repos/%s/%s/issues?state=%s&per_page=%d", base, url.PathEscape(owner), url.PathEscape(repo), state, issuesPerPage)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return results.Outcome{}, fmt.Errorf("list_issues: build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", userAgent)
	resp, err := client.Do(req)
	if err != nil {
		return results.Outcome{}, tool.Retryable(fmt.Errorf("list_issues: GET %s/%s issues: %w", owner, repo, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIssuesBody))
	if err != nil {
		return results.Outcome{}, tool.Retryable(fmt.Errorf("list_issues: read response: %w", err))
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return results.FailTool("GitHub rejected the user's connection (HTTP 401): the token is invalid or expired. Ask the user to reconnect GitHub."), nil
	case resp.StatusCode == http.StatusNotFound:
		return results.FailTool("repository %s/%s was not found, or the user's GitHub connection cannot see it (HTTP 404)", owner, repo), nil
	case resp.StatusCode >= 500:
		return results.Outcome{}, tool.Retryable(fmt.Errorf("list_issues: GitHub answered HTTP %s", resp.Status))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return results.FailTool("GitHub answered HTTP %s for %s/%s: %s", resp.Status, owner, repo, githubMessage(body)), nil
	}
	var issues []githubIssue
	if err := json.Unmarshal(body, &issues); err != nil {
		return results.Outcome{}, fmt.Errorf("list_issues: decode GitHub response: %w", err)
	}

	var lines []string
	var sources []results.Source
	for _, is := range issues {
		if len(is.PullRequest) > 0 && string(is.PullRequest) != "null" {
			continue
		}
		line := fmt.Sprintf("#%d %s [%s]", is.Number, is.Title, is.State)
		if len(is.Labels) > 0 {
			names := make([]string, len(is.Labels))
			for i, l := range is.Labels {
				names[i] = l.Name
			}
			line += " (labels: " + strings.Join(names, ", ") + ")"
		}
		if is.User.Login != "" {
			line += " by " + is.User.Login
		}
		lines = append(lines, line)
		// The API (GitHub Enterprise, or whatever the operator pointed it
		// at) chooses the URL; a link that is not http(s) is left out.
		if src := (results.Source{URL: is.HTMLURL, Title: fmt.Sprintf("%s/%s#%d %s", owner, repo, is.Number, is.Title)}); src.Validate() == nil {
			sources = append(sources, src)
		}
	}
	if len(lines) == 0 {
		return results.SucceedText(fmt.Sprintf("%s/%s has no %s issues", owner, repo, state)), nil
	}
	text := fmt.Sprintf("%d %s issues in %s/%s:\n%s", len(lines), state, owner, repo, strings.Join(lines, "\n"))
	if len(issues) == issuesPerPage {
		text += fmt.Sprintf("\n[only the first %d results were fetched]", issuesPerPage)
	}
	return results.SucceedText(text).WithSources(sources...), nil
}

// githubMessage pulls the "message" of a GitHub error body.
func githubMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		return e.Message
	}
	s, _ := results.Truncate(strings.TrimSpace(string(body)), results.Limits{MaxBytes: 200})
	return s
}

// redactOutcome is the last guard that the token never reaches the model,
// a log line or a card, whatever a server echoed back. Each string is
// cleaned after decoding, so an echo JSON-escaped, HTML-escaped or
// percent-encoded on the way in is found, and so is the raw token that
// encoding/json would only show as "\u003c" and the like.
func redactOutcome(out results.Outcome, err error, token string) (results.Outcome, error) {
	if token == "" {
		return out, err
	}
	re := tokenPattern(token)
	if err != nil {
		if re.MatchString(err.Error()) {
			retry := tool.IsRetryable(err)
			err = errors.New(re.ReplaceAllLiteralString(err.Error(), "[redacted]"))
			if retry {
				err = tool.Retryable(err)
			}
		}
		return out, err
	}
	raw, mErr := json.Marshal(out)
	if mErr != nil {
		return results.FailTool("the GitHub response could not be shown safely"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if dErr := dec.Decode(&tree); dErr != nil {
		return results.FailTool("the GitHub response could not be shown safely"), nil
	}
	cleanRaw, mErr := json.Marshal(redactTree(tree, re))
	if mErr != nil {
		return results.FailTool("the GitHub response could not be shown safely"), nil
	}
	var clean results.Outcome
	// The re-check covers what the walk cannot see into, such as media
	// bytes that happen to spell the token.
	if uErr := json.Unmarshal(cleanRaw, &clean); uErr != nil || re.Match(cleanRaw) {
		return results.FailTool("the GitHub response could not be shown safely"), nil
	}
	return clean, nil
}

// tokenPattern matches token in every spelling a response can carry it
// in. Case is ignored so that %3c and %3C both match; redacting a
// different-case lookalike of a secret costs nothing.
func tokenPattern(token string) *regexp.Regexp {
	forms := []string{token, jsonEscaped(token, true), jsonEscaped(token, false), html.EscapeString(token), url.QueryEscape(token), url.PathEscape(token)}
	// Longest first, so a form is not cut short by a shorter one it
	// contains; ties broken by text so that duplicates are adjacent.
	slices.SortFunc(forms, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	quoted := make([]string, 0, len(forms))
	for _, f := range slices.Compact(forms) {
		quoted = append(quoted, regexp.QuoteMeta(f))
	}
	return regexp.MustCompile(`(?i)` + strings.Join(quoted, "|"))
}

// jsonEscaped is s as it appears between the quotes of a JSON string.
func jsonEscaped(s string, escapeHTML bool) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(b.String(), "\n"), `"`), `"`)
}

// redactTree replaces the token in every string and object key of a
// decoded JSON value.
func redactTree(v any, re *regexp.Regexp) any {
	switch v := v.(type) {
	case string:
		return re.ReplaceAllLiteralString(v, "[redacted]")
	case []any:
		for i, e := range v {
			v[i] = redactTree(e, re)
		}
		return v
	case map[string]any:
		clean := make(map[string]any, len(v))
		for k, e := range v {
			clean[re.ReplaceAllLiteralString(k, "[redacted]")] = redactTree(e, re)
		}
		return clean
	}
	return v
}
