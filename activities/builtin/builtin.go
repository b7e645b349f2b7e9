// Package builtin holds Tollgate's built-in tools: files (read_file,
// list_dir, write_file, edit_file), shell, http_fetch, ask_user, handoff,
// and list_issues, the example of a tool gated on an account connection.
//
// File and shell tools are confined to the call's workspace (tool.Call's
// Workspace, with WorkDir as the current directory); a path that leaves it,
// by "..", an absolute path or a symbolic link, is a tool error. The shell
// is not a sandbox: a command can still read anything the worker's user
// can, which is why it needs approval by default.
package builtin

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// Tool names, as the model and turn input see them.
const (
	ReadFile   = "read_file"
	ListDir    = "list_dir"
	WriteFile  = "write_file"
	EditFile   = "edit_file"
	Shell      = "shell"
	HTTPFetch  = "http_fetch"
	AskUser    = "ask_user"
	ListIssues = "list_issues"
	Handoff    = "handoff"
)

// DefaultGitHubBaseURL is the API list_issues calls unless told otherwise.
const DefaultGitHubBaseURL = "https://api.github.com"

// Defaults for the zero fields of Options.
const (
	DefaultShellTimeout   = 60 * time.Second
	DefaultMaxShellOutput = 1 << 20
	DefaultFetchTimeout   = 30 * time.Second
	DefaultMaxFetchBytes  = 2 << 20
	DefaultMaxReadBytes   = 1 << 20
	DefaultMaxImageBytes  = 5 << 20
)

// Options configures the built-in tools. The workspace is not here: each
// call carries its own in tool.Call.
type Options struct {
	// HTTPClient is used by http_fetch and list_issues; nil means a client
	// with no timeout of its own (the tools set per-request deadlines).
	HTTPClient *http.Client
	// Connections holds the users' account credentials for list_issues.
	// Required: credentials are secrets, so there is no silent in-memory
	// default.
	Connections connections.Store
	// GitHubBaseURL is the GitHub REST API root; tests point it at httptest.
	GitHubBaseURL string

	// ShellTimeout bounds one shell command; the process group is killed
	// when it passes.
	ShellTimeout time.Duration
	// MaxShellOutput is how much combined output a command may keep; the
	// middle of longer output is dropped with a note.
	MaxShellOutput int
	// ShellEnv names the worker's environment variables that shell
	// commands see besides PATH, HOME, USER, LOGNAME, SHELL, LANG,
	// LANGUAGE, LC_*, TZ and TMPDIR; a trailing * matches a prefix.
	// Everything else, secrets included, is withheld. ParseShellEnv reads
	// the list from TOLLGATE_SHELL_ENV.
	ShellEnv []string
	// FetchTimeout and MaxFetchBytes bound one http_fetch.
	FetchTimeout  time.Duration
	MaxFetchBytes int64
	// FetchAllow opens destinations http_fetch refuses by default
	// (loopback, private, link-local, unique-local, CGNAT, multicast and
	// other non-public addresses). Each entry is a host name ("intranet",
	// trusted whatever it resolves to), host:port, an IP address, ip:port
	// or a CIDR ("10.1.0.0/16"); blanks are ignored. The worker fills it
	// from TOLLGATE_HTTP_ALLOW, comma-separated. list_issues is not
	// affected: its base URL is the operator's, not the model's.
	FetchAllow []string
	// MaxReadBytes bounds the text read_file returns in one call;
	// MaxImageBytes bounds an image it returns as media.
	MaxReadBytes  int
	MaxImageBytes int
}

func (o Options) withDefaults() Options {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.GitHubBaseURL == "" {
		o.GitHubBaseURL = DefaultGitHubBaseURL
	}
	if o.ShellTimeout <= 0 {
		o.ShellTimeout = DefaultShellTimeout
	}
	if o.MaxShellOutput <= 0 {
		o.MaxShellOutput = DefaultMaxShellOutput
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.MaxFetchBytes <= 0 {
		o.MaxFetchBytes = DefaultMaxFetchBytes
	}
	if o.MaxReadBytes <= 0 {
		o.MaxReadBytes = DefaultMaxReadBytes
	}
	if o.MaxImageBytes <= 0 {
		o.MaxImageBytes = DefaultMaxImageBytes
	}
	return o
}

// Names lists the built-in tools, in the order Tools returns them.
func Names() []string {
	return []string{ReadFile, ListDir, WriteFile, EditFile, Shell, HTTPFetch, AskUser, ListIssues, Handoff}
}

// Tools builds every built-in tool.
func Tools(opts Options) ([]tool.Tool, error) {
	if opts.Connections == nil {
		return nil, errors.New("builtin: Options.Connections is nil; list_issues needs a credential store")
	}
	opts = opts.withDefaults()
	builders := []func(Options) (tool.Tool, error){
		readFileTool, listDirTool, writeFileTool, editFileTool,
		shellTool, httpFetchTool, askUserTool, listIssuesTool, handoffTool,
	}
	tools := make([]tool.Tool, 0, len(builders))
	for _, build := range builders {
		t, err := build(opts)
		if err != nil {
			return nil, fmt.Errorf("builtin: %w", err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// toolError is a failure the model should read: a bad path, a missing
// file. Helpers return it as an error so callers can pass it up with the
// usual `if err != nil`; outcome turns it back into a tool_error.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func failf(format string, args ...any) error {
	return &toolError{msg: fmt.Sprintf(format, args...)}
}

// outcome maps an error from the helpers to what a tool returns: a
// tool_error for toolError, otherwise an internal (Go) error.
func outcome(err error) (results.Outcome, error) {
	var te *toolError
	if errors.As(err, &te) {
		return results.FailTool("%s", te.msg), nil
	}
	return results.Outcome{}, err
}
