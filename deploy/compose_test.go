// Package deploy_test checks docker-compose.yml, .env and the Dockerfile
// against what they depend on, without Docker: the variables they use,
// the server's config template, the files they mount, the programs the
// image builds, and the init service's shell command, run here on a
// temporary directory as it runs in its container. The compose scripts
// themselves run against a real PostgreSQL and Temporal server in
// internal/tests/cluster (make test-cluster).
package deploy_test

import (
	"bufio"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/tollgate-dev/tollgate/workflows"
)

// compose is the part of docker-compose.yml these tests read.
type compose struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image       string         `yaml:"image"`
	Build       any            `yaml:"build"`
	User        string         `yaml:"user"`
	Entrypoint  []string       `yaml:"entrypoint"`
	Command     any            `yaml:"command"`
	Environment any            `yaml:"environment"`
	Volumes     []string       `yaml:"volumes"`
	DependsOn   map[string]dep `yaml:"depends_on"`
	Restart     string         `yaml:"restart"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

type dep struct {
	Condition string `yaml:"condition"`
}

// env is a service's environment as a map, from either compose form.
func (s service) env(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	switch e := s.Environment.(type) {
	case nil:
	case map[string]any:
		for k, v := range e {
			out[k] = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(toString(v)), "\""), "\""))
		}
	case []any:
		for _, kv := range e {
			k, v, _ := strings.Cut(toString(kv), "=")
			out[k] = v
		}
	default:
		t.Fatalf("environment of unexpected form %T", e)
	}
	return out
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		b, _ := yaml.Marshal(v)
		return strings.TrimSpace(string(b))
	}
}

// commandLines is a service's command as the strings it holds.
func (s service) commandLines() []string {
	switch c := s.Command.(type) {
	case string:
		return []string{c}
	case []any:
		var out []string
		for _, v := range c {
			out = append(out, toString(v))
		}
		return out
	}
	return nil
}

const root = ".."

func load(t *testing.T) (compose, map[string]string, string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	var c compose
	require.NoError(t, yaml.Unmarshal(raw, &c), "docker-compose.yml")
	require.NotEmpty(t, c.Services)
	return c, readDotEnv(t), string(raw)
}

// readDotEnv reads .env as compose does: KEY=VALUE lines, # comments.
func readDotEnv(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, ".env"))
	require.NoError(t, err)
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, ".env line %q is not KEY=VALUE", line)
		vars[k] = v
	}
	require.NoError(t, sc.Err())
	return vars
}

// interpolation is compose's ${NAME} and ${NAME:-default}; $$ is a
// literal dollar for the container's shell.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:?-[^}]*)?\}`)

// expand substitutes .env's values the way compose does.
func expand(s string, vars map[string]string) string {
	return interpolation.ReplaceAllStringFunc(s, func(m string) string {
		sub := interpolation.FindStringSubmatch(m)
		if v, ok := vars[sub[1]]; ok && v != "" {
			return v
		}
		return strings.TrimPrefix(strings.TrimPrefix(sub[2], ":"), "-")
	})
}

// TestComposeVariables: every variable compose interpolates is pinned in
// .env or has a default, so `docker compose up` never starts a service
// with an empty image tag or user; what comes from the user's shell (API
// keys, model hosts) is written with a default.
func TestComposeVariables(t *testing.T) {
	c, vars, raw := load(t)
	for _, m := range interpolation.FindAllStringSubmatch(raw, -1) {
		name, def := m[1], m[2]
		if _, pinned := vars[name]; !pinned {
			require.NotEmpty(t, def, "docker-compose.yml uses ${%s} with no default and .env does not set it", name)
		}
	}
	for name, s := range c.Services {
		if s.Image == "" {
			require.NotNil(t, s.Build, "service %s has neither an image nor a build", name)
			continue
		}
		image := expand(s.Image, vars)
		ref, tag, ok := strings.Cut(image, ":")
		require.True(t, ok && tag != "" && tag != "latest", "service %s: image %q must name a pinned tag", name, image)
		require.NotContains(t, ref+tag, "$", "service %s: image %q", name, image)
	}
}

// TestComposeRunsTheTestedServer: compose runs the server, admin-tools and
// UI releases that go.mod pins, the ones every test in this repository
// runs in process, so what the tests prove is what compose runs.
func TestComposeRunsTheTestedServer(t *testing.T) {
	_, vars, _ := load(t)
	server := moduleVersion(t, "go.temporal.io/server")
	require.Equal(t, server, vars["TEMPORAL_VERSION"], "compose runs server %s, the tests server %s (go.mod)", vars["TEMPORAL_VERSION"], server)
	require.Equal(t, server, vars["TEMPORAL_ADMINTOOLS_VERSION"], "admin-tools %s is not the build for server %s", vars["TEMPORAL_ADMINTOOLS_VERSION"], server)
	ui := moduleVersion(t, "github.com/temporalio/ui-server/v2")
	require.Equal(t, ui, vars["TEMPORAL_UI_VERSION"], "compose runs UI %s, the tests UI server %s (go.mod)", vars["TEMPORAL_UI_VERSION"], ui)
}

// moduleVersion is a module's version in go.mod, without its "v", as
// image tags write it.
func moduleVersion(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", module).Output()
	require.NoError(t, err, "go list -m %s", module)
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
}

// TestComposeServerEnvironment: the server image fills its config from a
// template (the image runs `temporal-server start`, which loads the
// template embedded in the server); a variable the template does not read
// is silently ignored, which is how the VISIBILITY_* names went wrong
// before.
func TestComposeServerEnvironment(t *testing.T) {
	c, _, _ := load(t)
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/server").Output()
	require.NoError(t, err)
	tmpl, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "common", "config", "config_template_embedded.yaml"))
	require.NoError(t, err, "the server module's embedded config template")
	read := map[string]bool{}
	for _, m := range regexp.MustCompile(`env "([A-Z0-9_]+)"`).FindAllStringSubmatch(string(tmpl), -1) {
		read[m[1]] = true
	}
	require.NotEmpty(t, read)
	server := c.Services["temporal"]
	for name := range server.env(t) {
		require.True(t, read[name], "the temporal service sets %s, which the server's config template never reads", name)
	}

	// The dynamic config path is relative to the image's /etc/temporal and
	// must land on a file compose mounts from this repository.
	dc := server.env(t)["DYNAMIC_CONFIG_FILE_PATH"]
	require.NotEmpty(t, dc)
	host, ok := hostPath(server, filepath.Join("/etc/temporal", dc))
	require.True(t, ok, "DYNAMIC_CONFIG_FILE_PATH %s is not under a mounted directory", dc)
	_, err = os.Stat(host)
	require.NoError(t, err, "dynamic config %s", dc)
}

// hostPath maps a container path to the repository file a bind mount puts
// there.
func hostPath(s service, containerPath string) (string, bool) {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
			continue
		}
		if rel, err := filepath.Rel(parts[1], containerPath); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(root, parts[0], rel), true
		}
	}
	return "", false
}

// TestComposeMountsAndScripts: every file compose mounts from this
// repository exists, and the variables it gives the scripts are ones the
// scripts read.
func TestComposeMountsAndScripts(t *testing.T) {
	c, _, _ := load(t)
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, "./") {
				require.Contains(t, c.Volumes, src, "service %s mounts volume %s, which is not declared", name, src)
				continue
			}
			if src == "./workspace" {
				continue // created by Docker, handed over by tollgate-init
			}
			_, err := os.Stat(filepath.Join(root, src))
			require.NoError(t, err, "service %s mounts %s", name, src)
		}
		for d := range s.DependsOn {
			require.Contains(t, c.Services, d, "service %s depends on %s", name, d)
		}
		for d, cond := range s.DependsOn {
			if cond.Condition == "service_completed_successfully" {
				require.Empty(t, c.Services[d].Healthcheck, "%s waits for %s to finish, but it is a long-running service", name, d)
			}
		}
		for _, line := range s.commandLines() {
			script, ok := strings.CutPrefix(line, "/scripts/")
			if !ok {
				continue
			}
			body, err := os.ReadFile(filepath.Join(root, "deploy", "temporal", "scripts", script))
			require.NoError(t, err, "service %s runs %s", name, line)
			for k := range s.env(t) {
				require.Regexp(t, `\$\{?`+k+`\b`, string(body), "service %s sets %s, which %s never reads", name, k, script)
			}
		}
	}
}

// TestComposeImage: the programs compose starts are the ones the
// Dockerfile builds and copies, and the blob URL names the bucket the
// bucket service creates on the store compose runs.
func TestComposeImage(t *testing.T) {
	c, vars, _ := load(t)
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	built := map[string]bool{}
	for _, m := range regexp.MustCompile(`-o /out/(\S+) (\./\S+)`).FindAllStringSubmatch(string(df), -1) {
		built["/usr/local/bin/"+m[1]] = true
		out, err := exec.Command("go", "list", "-f", "{{.Name}}", filepath.Join(root, m[2])).CombinedOutput()
		require.NoError(t, err, "the Dockerfile builds %s: %s", m[2], out)
		require.Equal(t, "main", strings.TrimSpace(string(out)), "the Dockerfile builds %s, which is not a command", m[2])
	}
	require.True(t, built["/usr/local/bin/worker"], "the Dockerfile builds the worker")
	for name, s := range c.Services {
		if s.Build == nil {
			continue
		}
		if len(s.Entrypoint) > 0 {
			require.True(t, built[s.Entrypoint[0]], "service %s runs %s, which the image does not have", name, s.Entrypoint[0])
		}
		if s.Healthcheck != nil && len(s.Healthcheck.Test) > 1 {
			require.True(t, built[s.Healthcheck.Test[1]], "service %s's health check runs %s, which the image does not have", name, s.Healthcheck.Test[1])
		}
		// They run as the owner tollgate-init hands the directories to.
		require.Equal(t, expand(c.Services["tollgate-init"].env(t)["OWNER"], vars), expand(s.User, vars), "service %s runs as another user than tollgate-init's owner", name)

		u, err := url.Parse(s.env(t)["TOLLGATE_BLOB_URL"])
		require.NoError(t, err, "service %s TOLLGATE_BLOB_URL", name)
		require.Equal(t, "s3", u.Scheme)
		endpoint, err := url.Parse(u.Query().Get("endpoint"))
		require.NoError(t, err)
		require.Contains(t, c.Services, endpoint.Hostname(), "service %s's blob store endpoint is no compose service", name)
		require.Contains(t, strings.Join(c.Services["minio-create-bucket"].commandLines(), " "), "mb --ignore-existing local/"+u.Host,
			"service %s uses bucket %s, which minio-create-bucket does not create", name, u.Host)
	}
}

// TestComposeInit runs tollgate-init's command outside Docker: on a new
// workspace it hands the data and workspace directories to the worker's
// uid and seeds notes.txt; on a second run it keeps the user's notes.
// Then the worker's uid writes there, which is what it could not do
// before the init service existed.
func TestComposeInit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	c, vars, _ := load(t)
	init := c.Services["tollgate-init"]
	lines := init.commandLines()
	require.Len(t, lines, 1)
	// Not t.TempDir: its parent is private to root, and the worker's uid
	// must reach the directories.
	dir, err := os.MkdirTemp("", "tollgate-compose-init-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	paths := map[string]string{}
	for _, v := range init.Volumes {
		parts := strings.Split(v, ":")
		p := filepath.Join(dir, strings.Trim(parts[1], "/"))
		paths[parts[1]] = p
		if strings.HasPrefix(parts[0], "./") {
			if st, err := os.Stat(filepath.Join(root, parts[0])); err == nil && !st.IsDir() {
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
				b, err := os.ReadFile(filepath.Join(root, parts[0]))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(p, b, 0o644))
				continue
			}
		}
		require.NoError(t, os.MkdirAll(p, 0o755))
	}
	// The container's paths become the temporary directory's, longest
	// first so /seed/notes.txt is not taken for a prefix of another.
	script := strings.ReplaceAll(lines[0], "$$", "$")
	for _, cp := range []string{"/seed/notes.txt", "/workspace", "/data"} {
		require.Contains(t, paths, cp, "tollgate-init mounts %s", cp)
		script = strings.ReplaceAll(script, cp, paths[cp])
	}
	owner := expand(init.env(t)["OWNER"], vars)
	uid, _ := strconv.Atoi(strings.Split(owner, ":")[0])
	gid, _ := strconv.Atoi(strings.Split(owner, ":")[1])
	runInit := func() {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Env = append(os.Environ(), "OWNER="+owner)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "tollgate-init: %s", out)
	}
	runInit()
	seeded, err := os.ReadFile(paths["/workspace"] + "/notes.txt")
	require.NoError(t, err, "a new workspace gets notes.txt")
	want, _ := os.ReadFile(filepath.Join(root, "examples", "notes.txt"))
	require.Equal(t, string(want), string(seeded))
	for _, p := range []string{paths["/data"], paths["/workspace"], paths["/workspace"] + "/notes.txt"} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		sys := st.Sys().(*syscall.Stat_t)
		require.Equal(t, []uint32{uint32(uid), uint32(gid)}, []uint32{sys.Uid, sys.Gid}, "%s belongs to the worker's user", p)
	}
	st, _ := os.Stat(paths["/data"])
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "the data directory (connection tokens) is private")

	require.NoError(t, os.WriteFile(paths["/workspace"]+"/notes.txt", []byte("mine"), 0o644))
	runInit()
	kept, _ := os.ReadFile(paths["/workspace"] + "/notes.txt")
	require.Equal(t, "mine", string(kept), "a second compose up keeps the user's notes.txt")

	// The worker's user writes in both, as the worker does.
	if _, err := user.LookupId(strconv.Itoa(uid)); err != nil {
		t.Logf("uid %d has no passwd entry here; writing as it anyway", uid)
	}
	for _, p := range []string{paths["/data"], paths["/workspace"]} {
		touch := exec.Command("/bin/sh", "-c", `echo ok > "$1/written"`, "sh", p)
		touch.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		out, err := touch.CombinedOutput()
		require.NoError(t, err, "uid %d writes in %s: %s", uid, p, out)
	}
}

// The compose server (and the cluster test, which runs with the same
// file) refuses Signal payloads larger than any respond or send a
// workflow accepts, as worker --dev's embedded server does.
func TestComposeServerRefusesOversizedPayloads(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("temporal", "dynamicconfig", "development-sql.yaml"))
	require.NoError(t, err)
	var dc map[string][]struct {
		Value any `yaml:"value"`
	}
	require.NoError(t, yaml.Unmarshal(b, &dc))
	require.NotEmpty(t, dc["limit.blobSize.error"])
	require.NotEmpty(t, dc["limit.blobSize.warn"])
	require.Equal(t, workflows.ServerBlobSizeLimit, dc["limit.blobSize.error"][0].Value)
	require.Equal(t, workflows.ServerBlobSizeWarn, dc["limit.blobSize.warn"][0].Value)
	require.Greater(t, workflows.ServerBlobSizeLimit, workflows.MaxRespondBytes)
}
