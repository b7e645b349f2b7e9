package cluster

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// prerequisite stops the test when something it needs is missing: a skip
// on a developer's machine, a failure under CI=1, where a skipped test
// would pass for a tested one.
func prerequisite(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("cluster test prerequisite missing (CI is set, so this fails): %s", msg)
	}
	t.Skipf("cluster test skipped: %s", msg)
}

// binDir is where internal/tests/cluster/bins.sh put the Temporal server,
// temporal-sql-tool, the temporal CLI and SeaweedFS.
func binDir() string {
	if d := os.Getenv("TOLLGATE_CLUSTER_BIN"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "tollgate-cluster", "bin")
}

// freePorts returns n loopback ports nothing listens on now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// lowPorts returns n free loopback ports below 32768: the Temporal
// server keeps its membership ports in a smallint column, and the ports
// the kernel hands out for :0 are above that.
func lowPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for p := 20000 + rand.IntN(10000); len(ports) < n && p < 32768; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	for _, l := range ls {
		l.Close()
	}
	require.Len(t, ports, n, "free ports below 32768")
	return ports
}

// proc is a child process whose output goes to a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startProc starts a child that dies with the test process (Pdeathsig)
// and is killed at cleanup if still running.
func startProc(t *testing.T, logDir, name string, env []string, cred *syscall.Credential, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	require.NoError(t, cmd.Start(), "start %s", name)
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("--- last lines of %s ---\n%s", name, tail(logPath, 40))
		}
	})
	return p
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// stop asks politely, then kills.
func (p *proc) stop() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// waitLog waits for the process's log to contain s.
func (p *proc) waitLog(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(p.log)
		if bytes.Contains(b, []byte(s)) {
			return
		}
		if !p.running() {
			t.Fatalf("%s exited (%v) before it logged %q:\n%s", p.name, p.err, s, tail(p.log, 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not log %q within %s:\n%s", p.name, s, timeout, tail(p.log, 40))
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// run runs a command to completion, failing the test with its output.
func run(t *testing.T, ctx context.Context, env []string, bin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", bin, strings.Join(args, " "), out)
	return string(out)
}

// output runs a command to completion and returns its standard output
// alone, failing the test with its standard error.
func output(t *testing.T, ctx context.Context, env []string, bin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %s:\n%s", bin, strings.Join(args, " "), stderr.String())
	return string(out)
}

// waitTCP waits until something accepts connections on addr.
func waitTCP(t *testing.T, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s after %s", addr, timeout)
}

// postgres is a PostgreSQL cluster of its own in a temporary directory,
// listening on a loopback port.
type postgres struct {
	port int
	bin  string
	data string
	cred *syscall.Credential
}

// postgresBin finds Debian's PostgreSQL programs: on PATH, or in the
// newest /usr/lib/postgresql/<version>/bin.
func postgresBin() (string, bool) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real), true
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i], true
		}
	}
	return "", false
}

// startPostgres initialises a cluster whose superuser is temporal and
// starts it. PostgreSQL refuses to run as root, so as root it runs as
// the postgres user, in a directory that user owns. Durability is traded
// for speed (fsync off): the test kills the Temporal server, never the
// database.
func startPostgres(t *testing.T, logDir string) *postgres {
	t.Helper()
	bin, ok := postgresBin()
	if !ok {
		prerequisite(t, "PostgreSQL is not installed (apt-get install postgresql)")
	}
	root, err := os.MkdirTemp("", "tollgate-cluster-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	pg := &postgres{port: freePorts(t, 1)[0], bin: bin, data: filepath.Join(root, "data")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			prerequisite(t, "running as root and there is no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		require.NoError(t, os.Chmod(root, 0o755))
		require.NoError(t, os.Chown(root, uid, gid))
	}
	pgLog := filepath.Join(root, "postgres.log")
	init := startProc(t, logDir, "initdb", nil, pg.cred, filepath.Join(bin, "initdb"),
		"-D", pg.data, "-U", "temporal", "--auth=trust", "-E", "UTF8", "--no-sync")
	<-init.done
	require.NoError(t, init.err, "initdb:\n%s", tail(init.log, 20))
	start := startProc(t, logDir, "pg_ctl-start", nil, pg.cred, filepath.Join(bin, "pg_ctl"),
		"-D", pg.data, "-l", pgLog, "-w", "-t", "60", "start", "-o",
		fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", pg.port, root))
	<-start.done
	require.NoError(t, start.err, "pg_ctl start:\n%s\n%s", tail(start.log, 20), tail(pgLog, 20))
	t.Cleanup(func() {
		stop := exec.Command(filepath.Join(bin, "pg_ctl"), "-D", pg.data, "-m", "immediate", "-w", "stop")
		stop.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
		if out, err := stop.CombinedOutput(); err != nil {
			t.Logf("pg_ctl stop: %v\n%s", err, out)
		}
	})
	return pg
}

// temporalServer is the real Temporal server binary, configured the way
// its container image is: `temporal-server start` with no config file,
// which fills the template embedded in the server from environment
// variables.
type temporalServer struct {
	t       *testing.T
	logDir  string
	bin     string
	env     []string
	address string
	starts  int
	proc    *proc
}

func newTemporalServer(t *testing.T, logDir, bin string, pg *postgres, dynamicConfig string) *temporalServer {
	ports := lowPorts(t, 9)
	s := &temporalServer{
		t: t, logDir: logDir, bin: bin,
		address: fmt.Sprintf("127.0.0.1:%d", ports[0]),
	}
	s.env = []string{
		"DB=postgres12",
		"POSTGRES_SEEDS=127.0.0.1",
		fmt.Sprintf("DB_PORT=%d", pg.port),
		"POSTGRES_USER=temporal",
		"POSTGRES_PWD=temporal",
		"BIND_ON_IP=127.0.0.1",
		"LOG_LEVEL=warn",
		"DYNAMIC_CONFIG_FILE_PATH=" + dynamicConfig,
		fmt.Sprintf("FRONTEND_GRPC_PORT=%d", ports[0]),
		fmt.Sprintf("FRONTEND_HTTP_PORT=%d", ports[1]),
		fmt.Sprintf("FRONTEND_MEMBERSHIP_PORT=%d", ports[2]),
		fmt.Sprintf("HISTORY_GRPC_PORT=%d", ports[3]),
		fmt.Sprintf("HISTORY_MEMBERSHIP_PORT=%d", ports[4]),
		fmt.Sprintf("MATCHING_GRPC_PORT=%d", ports[5]),
		fmt.Sprintf("MATCHING_MEMBERSHIP_PORT=%d", ports[6]),
		fmt.Sprintf("WORKER_GRPC_PORT=%d", ports[7]),
		fmt.Sprintf("WORKER_MEMBERSHIP_PORT=%d", ports[8]),
	}
	return s
}

// start starts the server (again) and waits for its frontend port.
func (s *temporalServer) start() {
	s.t.Helper()
	s.starts++
	s.proc = startProc(s.t, s.logDir, fmt.Sprintf("temporal-server-%d", s.starts), s.env, nil, s.bin,
		"--allow-no-auth", "start")
	waitTCP(s.t, s.address, 90*time.Second)
}

// seaweed is SeaweedFS (master, volume server, filer and S3 gateway in
// one process) with one bucket and one access key.
type seaweed struct {
	endpoint string
	bucket   string
	key      string
	secret   string
}

func startSeaweed(t *testing.T, logDir, bin string) *seaweed {
	t.Helper()
	dir := t.TempDir()
	p := freePorts(t, 8)
	sw := &seaweed{
		endpoint: fmt.Sprintf("http://127.0.0.1:%d", p[6]),
		bucket:   "tollgate", key: "cluster-test-key", secret: "cluster-test-secret",
	}
	s3cfg := filepath.Join(dir, "s3.json")
	require.NoError(t, os.WriteFile(s3cfg, []byte(fmt.Sprintf(`{"identities":[{"name":"tollgate",
		"credentials":[{"accessKey":%q,"secretKey":%q}],
		"actions":["Admin","Read","Write","List","Tagging"]}]}`, sw.key, sw.secret)), 0o600))
	data := filepath.Join(dir, "data")
	require.NoError(t, os.MkdirAll(data, 0o700))
	// host:port.grpcPort: without the suffix weed shell dials port+10000.
	master := fmt.Sprintf("127.0.0.1:%d.%d", p[0], p[1])
	proc := startProc(t, logDir, "seaweedfs", nil, nil, bin, "server",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir="+data,
		fmt.Sprintf("-master.port=%d", p[0]), fmt.Sprintf("-master.port.grpc=%d", p[1]),
		"-master.volumeSizeLimitMB=64", "-master.telemetry=false",
		fmt.Sprintf("-volume.port=%d", p[2]), fmt.Sprintf("-volume.port.grpc=%d", p[3]), "-volume.max=0",
		"-filer", fmt.Sprintf("-filer.port=%d", p[4]), fmt.Sprintf("-filer.port.grpc=%d", p[5]),
		"-s3", fmt.Sprintf("-s3.port=%d", p[6]), fmt.Sprintf("-s3.port.grpc=%d", p[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config="+s3cfg)
	waitTCP(t, fmt.Sprintf("127.0.0.1:%d", p[6]), 90*time.Second)
	// The bucket, made the way an operator makes one, in weed shell; it
	// needs the filer up, so it is retried until it sticks.
	deadline := time.Now().Add(90 * time.Second)
	for {
		cmd := exec.Command(bin, "shell", "-master="+master)
		cmd.Stdin = strings.NewReader("s3.bucket.create -name " + sw.bucket + "\n")
		out, err := cmd.CombinedOutput()
		list := exec.Command(bin, "shell", "-master="+master)
		list.Stdin = strings.NewReader("s3.bucket.list\n")
		listed, _ := list.CombinedOutput()
		if err == nil && strings.Contains(string(listed), sw.bucket) {
			break
		}
		if time.Now().After(deadline) || !proc.running() {
			t.Fatalf("create the bucket: %v\n%s\n%s\n%s", err, out, listed, tail(proc.log, 30))
		}
		time.Sleep(time.Second)
	}
	return sw
}

// blobURL is the TOLLGATE_BLOB_URL every process of the test shares.
func (sw *seaweed) blobURL() string {
	return fmt.Sprintf("s3://%s?endpoint=%s&use_path_style=true&region=us-east-1", sw.bucket, sw.endpoint)
}

// env is what a process needs to reach the bucket.
func (sw *seaweed) env() []string {
	return []string{
		"TOLLGATE_BLOB_URL=" + sw.blobURL(),
		"AWS_ACCESS_KEY_ID=" + sw.key,
		"AWS_SECRET_ACCESS_KEY=" + sw.secret,
		"AWS_REGION=us-east-1",
	}
}
