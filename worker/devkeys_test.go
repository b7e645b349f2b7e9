package main

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

func TestParseDevKeys(t *testing.T) {
	keys, err := parseDevKeys("lena:leads, lars:leads+managers,eve,")
	require.NoError(t, err)
	require.Equal(t, []devKey{
		{Principal: "lena", Groups: []string{"leads"}},
		{Principal: "lars", Groups: []string{"leads", "managers"}},
		{Principal: "eve"},
	}, keys)
	for spec, want := range map[string]string{
		"lena:leads,lena:ops": "names lena twice",
		// One key file each: on a file system that folds case, Lena and
		// lena would share one.
		"Lena,lena:leads": "names lena twice",
		"DEV":             "names DEV twice",
		"lena:lead s":     `group "lead s" must be`,
		"-x":              `principal "-x" must be`,
	} {
		_, err := parseDevKeys(spec)
		require.ErrorContains(t, err, want, spec)
	}
}

// The walk-through of docs/approvals.md, on `worker --dev` as `make run`
// starts it with POLICY=examples/policy.yaml, MCP servers of the refunds
// stand-in, SCRIPTS=examples/mcp and DEV_KEYS=lena:leads,lars:leads,eve:
// a write into drafts/ runs without asking while one elsewhere asks; a
// refund above 1000.00 waits for two leads; after lena's approval the
// inbox shows 1 of 2, eve (no group) is refused, and lars's approval runs
// the refund and ends the turn.
func TestDevKeysApproveALargeRefundWithTwoLeads(t *testing.T) {
	dir := t.TempDir()
	server := filepath.Join(dir, "refunds-server")
	build := exec.Command("go", "build", "-o", server, "../examples/mcp/refunds")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	ledger := filepath.Join(dir, "refunds.txt")
	mcpConfig := filepath.Join(dir, "mcp.json")
	cfg, err := json.Marshal(map[string]any{"servers": map[string]any{"refunds": map[string]any{
		"command": server, "args": []string{"--ledger", ledger}, "timeout": "1m"}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(mcpConfig, cfg, 0o600))
	scripts, err := filepath.Abs("../examples/mcp")
	require.NoError(t, err)

	w := startWorkerDevWith(t,
		[]string{"--policy", "../examples/policy.yaml", "--dev-keys", "lena:leads,lars:leads,eve", "--log-level", "info"},
		[]string{"TOLLGATE_MCP_CONFIG=" + mcpConfig, "TOLLGATE_SCRIPTS_DIR=" + scripts})
	key := func(who string) string {
		b, err := os.ReadFile(filepath.Join(w.data, "dev-gateway."+who+".key"))
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	lena, lars, eve := key("lena"), key("lars"), key("eve")
	// The banner prints each key, as it prints the dev key, once the
	// worker is ready.
	require.Eventually(t, func() bool { return strings.Contains(w.logs(), "Tollgate worker ready") }, time.Minute, 100*time.Millisecond)
	require.Regexp(t, regexp.MustCompile(`Key of lena\s+`+regexp.QuoteMeta(lena)+`\s+\(groups leads\)`), w.logs())
	require.Regexp(t, regexp.MustCompile(`Key of eve\s+`+regexp.QuoteMeta(eve)+`\s+\(no groups\)`), w.logs())

	// The drafts rule: a write into drafts/ runs without asking, one
	// elsewhere asks.
	body, _ := json.Marshal(map[string]any{"prompt": "Draft the plan, then write it", "model": "scripted:drafts-demo.json", "tools": []string{"write_file"}})
	r := w.do(t, "POST", "/v1/turns", string(body))
	require.Equal(t, http.StatusCreated, r.code, r.body)
	var drafts struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(r.body), &drafts))
	w.waitCard(t, drafts.ID, "p1", results.StatePendingApproval)
	w.waitCard(t, drafts.ID, "d1", results.StateSucceeded)
	s, _ := w.state(t, drafts.ID)
	for _, c := range s.Cards {
		if c.CallID == "d1" {
			require.Equal(t, &results.Approval{Rule: "drafts", Action: results.ApprovalAllow}, c.Approval)
			require.Empty(t, c.Decisions, "nobody was asked")
		}
	}
	require.FileExists(t, filepath.Join(w.workspace, "drafts", "plan.md"))
	require.NoFileExists(t, filepath.Join(w.workspace, "plan.md"))

	body, _ = json.Marshal(map[string]any{"prompt": "Refund order 1001 in full", "model": "scripted:refund-demo.json", "tools": []string{"refunds.issue_refund"}})
	r = w.do(t, "POST", "/v1/turns", string(body))
	require.Equal(t, http.StatusCreated, r.code, r.body)
	var started struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(r.body), &started))
	id := started.ID
	w.waitCard(t, id, "r1", results.StatePendingApproval)

	approve := `{"call_id": "r1", "decision": "approve"}`
	r = w.doAs(t, lena, "POST", "/v1/turns/"+id+"/respond", approve)
	require.Equal(t, http.StatusOK, r.code, r.body)
	var card results.Card
	require.NoError(t, json.Unmarshal([]byte(r.body), &card))
	require.Equal(t, results.StatePendingApproval, card.State)
	require.Equal(t, "large_refund", card.Approval.Rule)
	require.Equal(t, []string{"lena"}, card.Approval.Approvals)

	// The inbox, as lars signs in to it with his key: 1 of 2, and his
	// approve button.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	page := get(t, browser, w.url+"/inbox")
	resp, err := browser.PostForm(w.url+"/inbox/login", url.Values{"csrf": {csrfOf(t, page)}, "key": {lars}})
	require.NoError(t, err)
	resp.Body.Close()
	page = html.UnescapeString(get(t, browser, w.url+"/inbox"))
	require.Contains(t, page, "<span>lars</span>", "the inbox is lars's")
	require.Contains(t, page, "Approvals 1 of 2: lena.")
	require.Contains(t, page, "Answered by members of <b>leads</b>")

	r = w.doAs(t, eve, "POST", "/v1/turns/"+id+"/respond", approve)
	require.NotEqual(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, "may only be answered by members of group leads (rule large_refund); eve is not one")
	_, err = os.Stat(ledger)
	require.True(t, os.IsNotExist(err), "a refund ran before its second approval")

	r = w.doAs(t, lars, "POST", "/v1/turns/"+id+"/respond", approve)
	require.Equal(t, http.StatusOK, r.code, r.body)
	deadline := time.Now().Add(time.Minute)
	for s, _ = w.state(t, id); s.Status != workflows.StatusCompleted; s, _ = w.state(t, id) {
		require.True(t, time.Now().Before(deadline), "the turn did not complete: %+v", s)
		time.Sleep(100 * time.Millisecond)
	}
	c := s.Cards[0]
	require.Equal(t, results.StateSucceeded, c.State)
	require.Equal(t, []string{"lena", "lars"}, c.Approval.Approvals)
	got, err := os.ReadFile(ledger)
	require.NoError(t, err)
	require.Equal(t, "refund 150000 cents on order 1001: \"arrived broken\"\n", string(got))
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	require.NotNil(t, m, "no csrf field on the page:\n%s", page)
	return m[1]
}

func get(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}

// Dev keys are the dev gateway's: without --dev, or with a bad entry, the
// worker stops at once with a sentence, before it dials any server.
func TestWorkerRefusesDevKeysItCannotServe(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	for args, want := range map[string]string{
		"--dev-keys\nlena:leads":                    "--dev-keys makes keys for the dev gateway, which runs only with --dev",
		"--dev-keys\nlena:leads,lena:ops":           "--dev-keys names lena twice",
		"--dev\n--gateway-addr\n\n--dev-keys\nlena": "--dev-keys makes keys for the dev gateway, which runs only with --dev",
	} {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), workerMainEnv+"=1", workerArgsEnv+"="+args+"\n"+strings.Join([]string{
			"--data", filepath.Join(dir, "data"), "--workspace", filepath.Join(dir, "ws"), "--address", "127.0.0.1:1",
		}, "\n"))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, string(out))
		require.Equal(t, 1, exit.ExitCode(), string(out))
		require.Contains(t, string(out), want)
		require.NotContains(t, string(out), "Embedded Temporal server started")
	}
}
