package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// mcpAuthServer is an MCP server behind its own authorization server, both
// on loopback: the server answers 401 naming its protected-resource
// metadata; the authorization server publishes RFC 8414 metadata, takes
// dynamic registrations, consents at once and issues a token only for the
// code, the PKCE verifier and the resource indicator it saw.
type mcpAuthServer struct {
	as, mcp *httptest.Server

	mu         sync.Mutex
	challenge  string
	resource   string
	registered int
	// seen is the Authorization header of each tool call.
	seen []string
}

func newMCPAuthServer(t *testing.T) *mcpAuthServer {
	m := &mcpAuthServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		base := "http://" + r.Host
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
			"registration_endpoint": base + "/register", "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_post"},
		})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		m.mu.Lock()
		m.registered++
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": "dyn-client", "client_secret": "dyn-secret", "token_endpoint_auth_method": "client_secret_post", "redirect_uris": req.RedirectURIs})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != "dyn-client" || q.Get("code_challenge_method") != "S256" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.challenge, m.resource = q.Get("code_challenge"), q.Get("resource")
		m.mu.Unlock()
		back, err := url.Parse(q.Get("redirect_uri"))
		if err != nil {
			http.Error(w, "bad redirect_uri", http.StatusBadRequest)
			return
		}
		v := back.Query()
		v.Set("code", "the-code")
		v.Set("state", q.Get("state"))
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		m.mu.Lock()
		defer m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.PostForm.Get("code") != "the-code" || base64.RawURLEncoding.EncodeToString(sum[:]) != m.challenge ||
			r.PostForm.Get("client_secret") != "dyn-secret" || r.PostForm.Get("resource") != m.resource {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"user-token","token_type":"Bearer","expires_in":3600}`))
	})
	m.as = httptest.NewServer(mux)
	t.Cleanup(m.as.Close)

	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "tracker", Version: "1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "issues", Description: "List my issues.", Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "2 open issues"}}}, nil, nil
		})
	handler := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	m.mcp = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": m.mcp.URL + "/mcp", "authorization_servers": []string{m.as.URL}})
			return
		}
		auth := r.Header.Get("Authorization")
		if auth == "Bearer user-token" || auth == "Bearer discovery" {
			if r.Method == http.MethodPost {
				body, _ := io.ReadAll(r.Body)
				if strings.Contains(string(body), `"tools/call"`) {
					m.mu.Lock()
					m.seen = append(m.seen, auth)
					m.mu.Unlock()
				}
				r.Body = io.NopCloser(strings.NewReader(string(body)))
			}
			handler.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+m.mcp.URL+`/.well-known/oauth-protected-resource/mcp"`)
		http.Error(w, "who are you", http.StatusUnauthorized)
	}))
	t.Cleanup(m.mcp.Close)
	return m
}

// freeLoopback is a loopback address no one listens on now.
func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// startGatewayProcess runs the gateway binary on the env's server, task
// queue and data directory, in dev mode on addr, with extra arguments;
// it returns once the gateway answers.
func startGatewayProcess(t *testing.T, e *env, bin, addr string, extra ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "gateway.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	defer logFile.Close()
	args := append([]string{"--address", e.hostPort, "--namespace", e.namespace, "--task-queue", e.tq,
		"--data", e.data, "--listen", addr, "--dev", "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = workerEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("gateway log:\n%s", b)
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	}, 30*time.Second, 100*time.Millisecond, "the gateway did not start")
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// The worker and gateway binaries share the providers discovered for MCP
// servers: the worker's call to an MCP server that answers 401 runs MCP's
// authorization discovery and waits for a connection; the gateway's
// connect link for that call (GET /v1/turns/{id}) leads to the server's
// own authorization server, whose callback the gateway takes, stores the
// token where the worker reads it, and the call resumes by itself with
// the user's token.
func TestMCPOAuthConnectLinkThroughTheBinaries(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the worker and gateway binaries and runs them as subprocesses")
	}
	buildW, buildG := buildWorker(t), buildProgram(t, "./cmd/gateway")
	m := newMCPAuthServer(t)
	e := newEnv(t, "mcp_oauth_binaries")

	dir := t.TempDir()
	cfg, err := json.Marshal(map[string]any{"servers": map[string]any{"tracker": map[string]any{
		"url":               m.mcp.URL + "/mcp",
		"discovery_headers": map[string]string{"Authorization": "Bearer discovery"},
	}}})
	require.NoError(t, err)
	cfgPath := filepath.Join(dir, "mcp.json")
	require.NoError(t, os.WriteFile(cfgPath, cfg, 0o600))
	script := `{"replies": [
	  {"text": "", "tool_calls": [{"id": "c1", "name": "tracker.issues", "arguments": {}}], "expect": {"last_role": "user"}},
	  {"text": "You have two.", "expect": {"last_role": "tool", "tool_results": 1}}
	]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "issues.json"), []byte(script), 0o600))
	secret := filepath.Join(dir, "link.secret")
	require.NoError(t, os.WriteFile(secret, []byte(base64.StdEncoding.EncodeToString([]byte("a link secret of at least 32 bytes!!"))), 0o600))

	gwAddr := freeLoopback(t)
	gwURL := "http://" + gwAddr
	startWorkerProcess(t, e, buildW(), "1", "TOLLGATE_MCP_CONFIG="+cfgPath, "TOLLGATE_SCRIPTS_DIR="+dir, "TOLLGATE_OAUTH_REDIRECT_BASE="+gwURL)
	startGatewayProcess(t, e, buildG(), gwAddr, "--link-secret-file", secret, "--mcp-oauth")

	run := e.start(workflows.Input{Prompt: "What are my issues?", Model: "scripted:issues.json", Tools: []string{"tracker.issues"}, User: "ann"})
	s := e.waitCard(run, "c1", results.StateWaitingConnection)
	require.Equal(t, "tracker", mustCard(t, s.Cards, "c1").Connection.Provider)

	// The gateway mints the call's connect link: it knows the provider the
	// worker discovered.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	var link string
	require.Eventually(t, func() bool {
		resp, err := browser.Get(gwURL + "/v1/turns/" + run.GetID())
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var v struct {
			ConnectLinks map[string]string `json:"connect_links"`
		}
		if json.NewDecoder(resp.Body).Decode(&v) != nil {
			return false
		}
		link = v.ConnectLinks["c1"]
		return link != ""
	}, 30*time.Second, 200*time.Millisecond, "the gateway offered no connect link for the waiting call")

	// A person opens it and presses Connect; the browser follows the
	// redirects to the authorization server and back to the callback.
	resp, err := browser.Get(link)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(page))
	csrf := csrfField.FindStringSubmatch(string(page))
	require.NotNil(t, csrf, "no csrf field on the connect page:\n%s", page)
	resp, err = browser.PostForm(link, url.Values{"csrf": {csrf[1]}})
	require.NoError(t, err)
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(page))
	require.True(t, strings.HasPrefix(resp.Request.URL.String(), gwURL+"/v1/oauth/callback"), "the flow ended at %s", resp.Request.URL)

	res := e.result(run)
	require.Equal(t, workflows.StatusCompleted, res.Status, res.Error)
	require.Equal(t, []string{"c1 error=false 2 open issues"}, toolTexts(res.Messages))
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Equal(t, []string{"Bearer user-token"}, m.seen, "the resumed call carried the user's token; the worker's discovery credential never went with it")
	require.Equal(t, 1, m.registered)
	require.Equal(t, m.mcp.URL+"/mcp", m.resource, "the resource indicator is the MCP server")
	entries, err := os.ReadDir(filepath.Join(e.data, "oauth-registry"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "the discovered provider is in the shared registry")
}
