package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/internal/devserver"
	"github.com/tollgate-dev/tollgate/internal/tests/browser"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// workerDevEnv holds the arguments (separated by \x1f) this test binary
// runs `worker` with when it is the stand-in worker process.
const workerDevEnv = "TOLLGATE_TEST_WORKER_DEV_ARGS"

// Cross-origin requests and DNS rebinding, as an attacker runs them: `worker --dev` is
// up with a turn waiting for approval of a file write, and the developer
// opens a page in Chromium. Neither a page on another loopback port
// (same site, another origin: the no-cors text/plain attack, a CORS
// JSON request, a form post) nor a page whose own name resolves to
// 127.0.0.1 and that reaches the gateway as its own origin (DNS
// rebinding) starts a turn or answers the waiting call.
func TestDevGatewayRefusesOtherPagesInChromium(t *testing.T) {
	if args := os.Getenv(workerDevEnv); args != "" {
		os.Args = append([]string{"worker"}, strings.Split(args, "\x1f")...)
		main()
		os.Exit(0)
	}
	ctx := browser.New(t, browser.Options{})
	w := startWorkerDev(t)
	id := w.startTurn(t, "")
	w.waitCard(t, id, "call_write_summary", results.StatePendingApproval)

	// The attacker's page, on another loopback port of the same machine.
	evilID := "evil-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	attack := `(async () => {
		const gw = ` + jsString(w.url) + `, out = [];
		const start = JSON.stringify({id: ` + jsString(evilID) + `, prompt: "Write pwned.txt", model: "scripted:demo", tools: ["write_file"]});
		const approve = JSON.stringify({call_id: "call_write_summary", decision: "approve", arguments: {path: "pwned.txt", content: "owned"}});
		const respond = gw + "/v1/turns/" + ` + jsString(id) + ` + "/respond";
		for (const [what, url, body] of [["start", gw + "/v1/turns", start], ["respond", respond, approve]]) {
			try { await fetch(url, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body}); out.push(what + " no-cors sent"); }
			catch (e) { out.push(what + " no-cors failed"); }
			try { const r = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"}, body}); out.push(what + " cors " + r.status); }
			catch (e) { out.push(what + " cors blocked"); }
		}
		return out.join("; ");
	})()`
	page := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>cute cats</title><h1 id="ready">Cats</h1>`+
			`<iframe name="sink"></iframe><form id="f" method="post" target="sink" enctype="text/plain"><input name='{"call_id":"call_write_summary","decision":"approve","x":"' value='"}'></form>`)
	})}
	pageLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = page.Serve(pageLn) }()
	t.Cleanup(func() { _ = page.Close() })
	pageURL := "http://" + pageLn.Addr().String()

	run := func(url, js string) string {
		t.Helper()
		require.NoError(t, browser.Open(ctx, url, "#ready"))
		actx, cancel := context.WithTimeout(ctx, browser.DefaultTimeout)
		defer cancel()
		out, err := chromedp.Run(actx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		return out
	}
	out := run(pageURL+"/", attack)
	t.Logf("the page on another port: %s", out)
	// A JSON request from another origin needs a preflight the gateway
	// never grants, so the browser does not send it.
	require.Contains(t, out, "start cors blocked")
	require.Contains(t, out, "respond cors blocked")
	// A form, the one cross-origin POST a page can make without script.
	formJS := `(() => { const f = document.getElementById("f"); f.action = ` + jsString(w.url+"/v1/turns/"+id+"/respond") + `; f.submit(); return new Promise(r => setTimeout(() => r("submitted"), 1500)); })()`
	require.Equal(t, "submitted", run(pageURL+"/", formJS))
	w.requireUntouched(t, id, evilID)

	// DNS rebinding: the attacker's name (Chromium resolves *.localhost
	// to loopback, as rebinding makes a name resolve) served the page;
	// now the same name and port lead to the gateway, so the page reads
	// and posts as its own origin. Here a forwarder takes the page
	// server's port once the page has loaded.
	rebindLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := rebindLn.Addr().(*net.TCPAddr).Port
	evil := &http.Server{Handler: page.Handler}
	go func() { _ = evil.Serve(rebindLn) }()
	require.NoError(t, browser.Open(ctx, fmt.Sprintf("http://rebind.localhost:%d/", port), "#ready"))
	require.NoError(t, evil.Close())
	forward(t, fmt.Sprintf("127.0.0.1:%d", port), strings.TrimPrefix(w.url, "http://"))
	rebound := `(async () => {
		const out = [];
		for (const [what, url, init] of [
			["list", "/v1/turns", {}],
			["inbox", "/inbox", {}],
			["start", "/v1/turns", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({id: ` + jsString(evilID+"-rebound") + `, prompt: "Write pwned.txt", model: "scripted:demo", tools: ["write_file"]})}],
			["respond", "/v1/turns/" + ` + jsString(id) + ` + "/respond", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({call_id: "call_write_summary", decision: "approve"})}],
		]) {
			try { const r = await fetch(url, init); out.push(what + " " + r.status + " " + (await r.text()).slice(0, 200)); }
			catch (e) { out.push(what + " failed " + e); }
		}
		return out.join("\n");
	})()`
	actx, cancel := context.WithTimeout(ctx, browser.DefaultTimeout)
	out, err = chromedp.Run(actx, chromedp.Evaluate[string](rebound, chromedp.EvalAwaitPromise))
	cancel()
	require.NoError(t, err)
	t.Logf("the rebound page:\n%s", out)
	for _, what := range []string{"list", "inbox", "start", "respond"} {
		require.Contains(t, out, what+" 421 ", "the gateway refuses the rebound name on %s", what)
	}
	require.NotContains(t, out, id+`"`, "the rebound page read no turn")
	w.requireUntouched(t, id, evilID, evilID+"-rebound")

	// The developer's own tools still work: the call is approved with
	// the dev key, as the README's curl lines do.
	r := w.do(t, "POST", "/v1/turns/"+id+"/respond", `{"call_id":"call_write_summary","decision":"approve"}`)
	require.Equal(t, http.StatusOK, r.code, r.body)
}

// workerDev is `worker --dev` running as a subprocess: this test binary
// in stand-in mode, so it is the worker's own main.
type workerDev struct {
	url, key, workspace, data string
	// logs is what the worker wrote so far.
	logs func() string
}

func startWorkerDev(t *testing.T) *workerDev {
	t.Helper()
	return startWorkerDevWith(t, nil, nil)
}

// startWorkerDevWith starts `worker --dev` with more arguments and
// environment.
func startWorkerDevWith(t *testing.T, extraArgs, extraEnv []string) *workerDev {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	data, workspace := filepath.Join(dir, "data"), filepath.Join(dir, "workspace")
	require.NoError(t, os.MkdirAll(workspace, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(workspace, "notes.txt"), []byte("notes\n"), 0o600))
	temporalPort, err := devserver.FreePort()
	require.NoError(t, err)
	gwPort, err := devserver.FreePort()
	require.NoError(t, err)
	gwAddr := fmt.Sprintf("127.0.0.1:%d", gwPort)
	args := append([]string{"--dev", "--dev-port", strconv.Itoa(temporalPort), "--ui-port", "0", "--data", data, "--workspace", workspace, "--gateway-addr", gwAddr, "--log-level", "warn"}, extraArgs...)
	cmd := exec.Command(exe, "-test.run=^TestDevGatewayRefusesOtherPagesInChromium$")
	cmd.Env = append(os.Environ(), workerDevEnv+"="+strings.Join(args, "\x1f"), "TOLLGATE_LINK_SECRET_FILE=", "TOLLGATE_METRICS_ADDR=", "TOLLGATE_MCP_CONFIG=", "TOLLGATE_OAUTH_PROVIDERS=", "TOLLGATE_POLICY=", "TOLLGATE_DEV_KEYS=")
	cmd.Env = append(cmd.Env, extraEnv...)
	var logs bytes.Buffer
	var mu sync.Mutex
	cmd.Stdout, cmd.Stderr = lockedWriter{&mu, &logs}, lockedWriter{&mu, &logs}
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("worker --dev output:\n%s", logs.String())
			mu.Unlock()
		}
	})
	w := &workerDev{url: "http://" + gwAddr, workspace: workspace, data: data, logs: func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case <-exited:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("worker --dev exited before its gateway answered:\n%s", logs.String())
		default:
		}
		if resp, err := http.Get(w.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		require.True(t, time.Now().Before(deadline), "worker --dev's gateway did not answer in time")
		time.Sleep(200 * time.Millisecond)
	}
	key, err := os.ReadFile(filepath.Join(data, "dev-gateway.key"))
	require.NoError(t, err)
	w.key = strings.TrimSpace(string(key))
	return w
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type reply struct {
	code int
	body string
}

// do calls the gateway as the README's curl lines do: the dev key, and
// JSON bodies said to be JSON.
func (w *workerDev) do(t *testing.T, method, path, body string) reply {
	t.Helper()
	return w.doAs(t, w.key, method, path, body)
}

// doAs calls the gateway with key.
func (w *workerDev) doAs(t *testing.T, key, method, path, body string) reply {
	t.Helper()
	req, err := http.NewRequest(method, w.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{code: resp.StatusCode, body: string(b)}
}

func (w *workerDev) startTurn(t *testing.T, id string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"id": id, "prompt": "Summarise notes.txt into summary.md", "model": "scripted:demo", "tools": []string{"read_file", "write_file", "ask_user"}})
	r := w.do(t, "POST", "/v1/turns", string(body))
	require.Equal(t, http.StatusCreated, r.code, r.body)
	var started struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(r.body), &started))
	return started.ID
}

func (w *workerDev) state(t *testing.T, id string) (workflows.State, int) {
	t.Helper()
	r := w.do(t, "GET", "/v1/turns/"+id, "")
	var s workflows.State
	if r.code == http.StatusOK {
		require.NoError(t, json.Unmarshal([]byte(r.body), &s))
	}
	return s, r.code
}

func (w *workerDev) waitCard(t *testing.T, id, call string, want results.State) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s, _ := w.state(t, id)
		for _, c := range s.Cards {
			if c.CallID == call && c.State == want {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "call %s of %s never became %s; last %+v", call, id, want, s)
		time.Sleep(100 * time.Millisecond)
	}
}

// requireUntouched: the waiting call still waits, no turn of the
// attacker's exists, and nothing was written.
func (w *workerDev) requireUntouched(t *testing.T, id string, evil ...string) {
	t.Helper()
	s, code := w.state(t, id)
	require.Equal(t, http.StatusOK, code)
	for _, c := range s.Cards {
		if c.CallID == "call_write_summary" {
			require.Equal(t, results.StatePendingApproval, c.State, "the page answered the call: %+v", c.Decisions)
		}
	}
	for _, e := range evil {
		_, code := w.state(t, e)
		require.Equal(t, http.StatusNotFound, code, "the page started turn %s", e)
	}
	_, err := os.Stat(filepath.Join(w.workspace, "pwned.txt"))
	require.True(t, os.IsNotExist(err), "the page wrote into the workspace")
}

// forward listens on addr (just freed) and copies every connection to
// to, as a name rebound to this machine leads to whatever listens there.
func forward(t *testing.T, addr, to string) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
