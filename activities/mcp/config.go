package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/tool"
)

// Config is an MCP configuration file: the servers whose tools a worker
// offers, by name. A server's tools are named <server>.<tool>.
//
//	{"servers": {
//	  "notes": {"command": "notes-mcp", "args": ["--file", "notes.md"], "env": ["NOTES_*"],
//	            "tools": {"append": {"approval": "always"}}},
//	  "tracker": {"url": "http://127.0.0.1:8931/mcp",
//	              "headers": {"X-Team": "ops"},
//	              "discovery_headers": {"Authorization": {"env": "TRACKER_TOKEN", "prefix": "Bearer "}}}
//	}}
type Config struct {
	Servers map[string]Server `json:"servers"`
}

// Server is one MCP server: a command spoken to over stdio, or a
// streamable HTTP endpoint. Exactly one of Command and URL is set.
type Server struct {
	// Command, Args, Env and Dir start a stdio server. Each call starts
	// its own process (see the package documentation for why).
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env names the variables of the worker's environment the server
	// sees, besides PATH, HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE,
	// LC_*, TZ and TMPDIR; NAME_* matches a prefix. Nothing else passes:
	// the worker's environment holds model keys and other secrets.
	Env []string `json:"env,omitempty"`
	// Dir is the server's working directory; empty is the worker's.
	Dir string `json:"dir,omitempty"`

	// URL is a streamable HTTP endpoint.
	URL string `json:"url,omitempty"`
	// Headers go with every request, discovery and calls.
	Headers map[string]Secret `json:"headers,omitempty"`
	// DiscoveryHeaders go only with the worker's own requests at start,
	// when it lists the tools: a service credential for a server whose
	// calls run with each user's own connection.
	DiscoveryHeaders map[string]Secret `json:"discovery_headers,omitempty"`
	// ConnectHint tells a person how to connect an account when the
	// server answers 401; the server's own metadata is used otherwise.
	ConnectHint string `json:"connect_hint,omitempty"`
	// OAuth names a client registered beforehand with the server's
	// authorization server, for MCP's authorization flow (Options.OAuth);
	// without it Tollgate uses a client ID metadata document or registers
	// a client itself.
	OAuth *ServerOAuth `json:"oauth,omitempty"`

	// Timeout bounds one call, elicitation rounds included (default 60s).
	Timeout Duration `json:"timeout,omitempty"`
	// ProtocolVersion pins the MCP protocol version offered; empty offers
	// the newest the SDK speaks and lets the server choose.
	ProtocolVersion string `json:"protocol_version,omitempty"`
	// MaxResultBytes bounds what one call may receive (default 4 MiB).
	MaxResultBytes int `json:"max_result_bytes,omitempty"`

	// Tools overrides the policy of tools by their MCP name; "*" applies
	// to every tool of the server that has no entry of its own.
	Tools map[string]Override `json:"tools,omitempty"`
}

// ServerOAuth is a pre-registered client of a server's authorization
// server.
type ServerOAuth struct {
	ClientID     string  `json:"client_id"`
	ClientSecret *Secret `json:"client_secret,omitempty"`
	// Grant "client_credentials" makes the worker get tokens for itself
	// (its own access, for every user's calls and the tool list) rather
	// than connect each user's account; PrivateKey (PKCS #8 PEM, EC
	// P-256) then signs its client assertion instead of a secret.
	Grant      string   `json:"grant,omitempty"`
	PrivateKey *Secret  `json:"private_key,omitempty"`
	Scopes     []string `json:"scopes,omitempty"`
	// Grant "identity_assertion" (cross-app access) also makes the
	// worker's own tokens: IdentityToken, an identity provider's ID token,
	// is exchanged at IdPTokenURL (as client IdPClientID) for an
	// authorization grant the server's authorization server takes.
	IdentityToken *Secret `json:"identity_token,omitempty"`
	IdPTokenURL   string  `json:"idp_token_url,omitempty"`
	IdPClientID   string  `json:"idp_client_id,omitempty"`
}

// ServerOAuth.Grant values for the worker's own tokens.
const (
	grantClientCredentials = "client_credentials"
	grantIdentityAssertion = "identity_assertion"
)

// Override is the operator's word on one tool; it wins over the
// server's annotations.
type Override struct {
	// Approval is "always" or "never"; empty keeps the annotation's.
	Approval tool.Approval `json:"approval,omitempty"`
	// Idempotent, when set, decides retries (true: retried with backoff;
	// false: run at most once).
	Idempotent *bool `json:"idempotent,omitempty"`
	// Disabled hides the tool.
	Disabled bool `json:"disabled,omitempty"`
}

// Secret is a header value: written in the file ("value", or a bare
// string), or read when a session opens from the worker's environment
// ("env") or a file ("file"), so credentials stay out of the config.
// Prefix goes before what env or file hold ("Bearer ").
type Secret struct {
	Value  string `json:"value,omitempty"`
	Env    string `json:"env,omitempty"`
	File   string `json:"file,omitempty"`
	Prefix string `json:"prefix,omitempty"`
}

// UnmarshalJSON takes a bare string as a literal value.
func (s *Secret) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*s = Secret{}
		return json.Unmarshal(b, &s.Value)
	}
	type plain Secret
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*s = Secret(p)
	return nil
}

// Duration is a time.Duration written as a Go duration string ("90s").
type Duration time.Duration

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"90s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Limits and defaults of the configuration.
const (
	DefaultTimeout        = 60 * time.Second
	DefaultMaxResultBytes = 4 << 20
	maxConfigBytes        = 1 << 20
	maxServers            = 64
	maxArgs               = 256
	maxArgBytes           = 4 << 10
	maxSecretBytes        = 64 << 10
	maxTimeout            = time.Hour
	maxResultBytesCap     = 64 << 20
	minResultBytes        = 4 << 10
	maxServerNameBytes    = 32
)

var (
	serverName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	envPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\*?$`)
	// headerName is an HTTP token (RFC 9110).
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// reservedHeaders belong to the transport; a configured value would break
// the protocol or smuggle a second request.
var reservedHeaders = []string{"Host", "Content-Length", "Content-Type", "Accept", "Connection", "Transfer-Encoding", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

// protocolVersions are the versions the SDK (v1.8.0) speaks.
var protocolVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// LoadConfig reads and checks a configuration file.
func LoadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("mcp config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return Config{}, fmt.Errorf("mcp config: read %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return Config{}, fmt.Errorf("mcp config: %s is larger than %d bytes", path, maxConfigBytes)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("mcp config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes and checks a configuration. Unknown fields are
// errors: a misspelt "aproval" must not leave a tool unguarded.
func ParseConfig(data []byte) (Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, errors.New("decode: more than one JSON value")
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate checks every server, in name order so the first error is
// always the same one.
func (c Config) Validate() error {
	if len(c.Servers) == 0 {
		return errors.New(`names no servers (want {"servers": {"<name>": {...}}})`)
	}
	if len(c.Servers) > maxServers {
		return fmt.Errorf("names %d servers; at most %d", len(c.Servers), maxServers)
	}
	for _, name := range sortedKeys(c.Servers) {
		if err := c.Servers[name].validate(name); err != nil {
			return fmt.Errorf("server %q: %w", name, err)
		}
	}
	return nil
}

func (s Server) validate(name string) error {
	if len(name) > maxServerNameBytes || !serverName.MatchString(name) {
		return fmt.Errorf("the name must be 1-%d letters, digits, '_' or '-' (it becomes the first part of its tools' names and the connection provider)", maxServerNameBytes)
	}
	if err := connections.ValidName(name); err != nil {
		return fmt.Errorf("the name cannot name a connection provider: %w", err)
	}
	switch {
	case s.Command == "" && s.URL == "":
		return errors.New(`set "command" (stdio) or "url" (streamable HTTP)`)
	case s.Command != "" && s.URL != "":
		return errors.New(`set "command" or "url", not both`)
	case s.Command != "":
		if err := s.validateStdio(); err != nil {
			return err
		}
	default:
		if err := s.validateHTTP(); err != nil {
			return err
		}
	}
	if s.OAuth != nil {
		if s.OAuth.ClientID == "" || len(s.OAuth.ClientID) > 512 {
			return errors.New(`"oauth" needs a "client_id" of at most 512 bytes`)
		}
		if sec := s.OAuth.ClientSecret; sec != nil {
			if err := sec.validate(); err != nil {
				return fmt.Errorf("oauth client_secret: %w", err)
			}
		}
		if k := s.OAuth.PrivateKey; k != nil {
			// A PEM key spans lines; it never goes into a header.
			lines := *k
			lines.Value = strings.ReplaceAll(strings.ReplaceAll(lines.Value, "\r", ""), "\n", "")
			if err := lines.validate(); err != nil {
				return fmt.Errorf("oauth private_key: %w", err)
			}
		}
		switch s.OAuth.Grant {
		case "":
		case grantClientCredentials:
			if s.OAuth.ClientSecret == nil && s.OAuth.PrivateKey == nil {
				return errors.New(`"oauth" with grant client_credentials needs a "client_secret" or a "private_key"`)
			}
		case grantIdentityAssertion:
			if s.OAuth.ClientSecret == nil || s.OAuth.IdentityToken == nil {
				return errors.New(`"oauth" with grant identity_assertion needs a "client_secret" and an "identity_token"`)
			}
			if u, err := url.Parse(s.OAuth.IdPTokenURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
				return errors.New(`"oauth" with grant identity_assertion needs "idp_token_url", the identity provider's http(s) token endpoint`)
			}
			if err := s.OAuth.IdentityToken.validate(); err != nil {
				return fmt.Errorf("oauth identity_token: %w", err)
			}
		default:
			return fmt.Errorf(`"oauth" grant %q must be empty (each user connects), client_credentials or identity_assertion`, s.OAuth.Grant)
		}
	}
	if t := time.Duration(s.Timeout); t < 0 || t > maxTimeout || (t > 0 && t < time.Second) {
		return fmt.Errorf("timeout %s must be between 1s and %s", t, maxTimeout)
	}
	if s.ProtocolVersion != "" && !slices.Contains(protocolVersions, s.ProtocolVersion) {
		return fmt.Errorf("protocol_version %q is not one of %s", s.ProtocolVersion, strings.Join(protocolVersions, ", "))
	}
	if s.MaxResultBytes != 0 && (s.MaxResultBytes < minResultBytes || s.MaxResultBytes > maxResultBytesCap) {
		return fmt.Errorf("max_result_bytes %d must be between %d and %d", s.MaxResultBytes, minResultBytes, maxResultBytesCap)
	}
	for _, tn := range sortedKeys(s.Tools) {
		o := s.Tools[tn]
		if tn == "" {
			return errors.New("a tools entry has an empty name")
		}
		switch o.Approval {
		case "", tool.ApprovalAlways, tool.ApprovalNever:
		default:
			return fmt.Errorf("tool %q: approval %q must be always or never", tn, o.Approval)
		}
	}
	return nil
}

func (s Server) validateStdio() error {
	if len(s.Headers) > 0 || len(s.DiscoveryHeaders) > 0 || s.ConnectHint != "" || s.OAuth != nil {
		return errors.New(`"headers", "discovery_headers", "connect_hint" and "oauth" are for "url" servers`)
	}
	if strings.ContainsRune(s.Command, 0) {
		return errors.New("the command contains NUL")
	}
	if len(s.Args) > maxArgs {
		return fmt.Errorf("%d args; at most %d", len(s.Args), maxArgs)
	}
	for i, a := range s.Args {
		if len(a) > maxArgBytes || strings.ContainsRune(a, 0) {
			return fmt.Errorf("arg %d is longer than %d bytes or contains NUL", i, maxArgBytes)
		}
	}
	for _, e := range s.Env {
		if !envPattern.MatchString(e) {
			return fmt.Errorf("env entry %q must be a variable name or NAME_* (values come from the worker's environment)", e)
		}
	}
	return nil
}

func (s Server) validateHTTP() error {
	if len(s.Args) > 0 || len(s.Env) > 0 || s.Dir != "" {
		return errors.New(`"args", "env" and "dir" are for "command" servers`)
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("url %q must be an http:// or https:// URL with a host", redactURL(s.URL))
	}
	if u.User != nil {
		return errors.New(`the url carries credentials; put them in "headers" read from "env" or "file"`)
	}
	if len(s.ConnectHint) > 1024 {
		return errors.New("connect_hint is longer than 1024 bytes")
	}
	for _, set := range []map[string]Secret{s.Headers, s.DiscoveryHeaders} {
		for _, name := range sortedKeys(set) {
			if !headerName.MatchString(name) {
				return fmt.Errorf("header %q is not a valid header name", name)
			}
			for _, r := range reservedHeaders {
				if strings.EqualFold(name, r) {
					return fmt.Errorf("header %q belongs to the transport and cannot be configured", name)
				}
			}
			if err := set[name].validate(); err != nil {
				return fmt.Errorf("header %q: %w", name, err)
			}
		}
	}
	return nil
}

func (s Secret) validate() error {
	n := 0
	for _, v := range []string{s.Value, s.Env, s.File} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return errors.New(`set exactly one of "value", "env" and "file"`)
	}
	if s.Value != "" && s.Prefix != "" {
		return errors.New(`"prefix" goes with "env" or "file"`)
	}
	if strings.ContainsAny(s.Value+s.Prefix, "\r\n\x00") {
		return errors.New("the value contains a line break or NUL")
	}
	if s.Env != "" && !envPattern.MatchString(s.Env) || strings.HasSuffix(s.Env, "*") {
		return fmt.Errorf("env %q is not a variable name", s.Env)
	}
	return nil
}

// resolve reads the secret's value. Errors name where it was looked for,
// never what was found.
func (s Secret) resolve(getenv func(string) string) (string, error) {
	var v string
	switch {
	case s.Value != "":
		return s.Value, nil
	case s.Env != "":
		v = getenv(s.Env)
		if v == "" {
			return "", fmt.Errorf("environment variable %s is empty or unset", s.Env)
		}
	default:
		f, err := os.Open(s.File)
		if err != nil {
			return "", fmt.Errorf("read secret file: %w", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
		if err != nil {
			return "", fmt.Errorf("read secret file %s: %w", s.File, err)
		}
		if len(b) > maxSecretBytes {
			return "", fmt.Errorf("secret file %s is larger than %d bytes", s.File, maxSecretBytes)
		}
		v = strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("secret file %s is empty", s.File)
		}
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		return "", errors.New("the secret contains a line break or NUL")
	}
	return s.Prefix + v, nil
}

// resolvePEM is resolve for a PEM block, which spans lines.
func (s Secret) resolvePEM(getenv func(string) string) (string, error) {
	if s.Value != "" {
		return s.Value, nil
	}
	if s.Env != "" {
		if v := getenv(s.Env); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("environment variable %s is empty or unset", s.Env)
	}
	b, err := os.ReadFile(s.File)
	if err != nil {
		return "", fmt.Errorf("read the key file: %w", err)
	}
	if len(b) > maxSecretBytes {
		return "", fmt.Errorf("key file %s is larger than %d bytes", s.File, maxSecretBytes)
	}
	return string(b), nil
}

// resolveHeaders reads a set of headers.
func resolveHeaders(set map[string]Secret, getenv func(string) string) (http.Header, error) {
	h := http.Header{}
	for _, name := range sortedKeys(set) {
		v, err := set[name].resolve(getenv)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
		h.Set(name, v)
	}
	return h, nil
}

func (s Server) timeout() time.Duration {
	if s.Timeout == 0 {
		return DefaultTimeout
	}
	return time.Duration(s.Timeout)
}

func (s Server) maxResultBytes() int {
	if s.MaxResultBytes == 0 {
		return DefaultMaxResultBytes
	}
	return s.MaxResultBytes
}

// sessionBudget bounds all a session receives: the result, and the
// notifications (progress, logs) a long call may send besides.
func (s Server) sessionBudget() int64 {
	return 2*int64(s.maxResultBytes()) + 1<<20
}

// redactURL keeps a URL's scheme, host and path: a query may carry a key.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
