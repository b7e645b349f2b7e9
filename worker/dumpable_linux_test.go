package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

const (
	environHelperEnv = "TOLLGATE_TEST_ENVIRON_HELPER"
	environSecret    = "sk-environ-test-secret"
)

func TestProtectEnvironMakesTheWorkerNonDumpable(t *testing.T) {
	if mode := os.Getenv(environHelperEnv); mode != "" {
		environHelper(mode)
		return
	}
	require.NoError(t, protectEnviron())
	dumpable, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, 0, dumpable)
}

// TestShellChildCannotReadWorkerEnviron runs this test binary as a
// stand-in worker with a secret in its environment, as a non-root user,
// and has its bash child read /proc/$PPID/environ, as a prompt-injected
// command would.
func TestShellChildCannotReadWorkerEnviron(t *testing.T) {
	exe := helperExecutable(t)
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	control := runEnvironHelper(t, exe, "control", cred)
	require.Contains(t, control, environSecret, "without protection the child must read the secret, or this test proves nothing")

	protected := runEnvironHelper(t, exe, "protect", cred)
	require.NotContains(t, protected, environSecret)
	require.Contains(t, protected, "Permission denied")

	if os.Getuid() == 0 {
		// Documented limit: a root worker's children are root.
		require.Contains(t, runEnvironHelper(t, exe, "protect", nil), environSecret)
	}
}

// environHelper is the stand-in worker: it protects itself (or not) and
// prints what a child shell reads of its environment.
func environHelper(mode string) {
	if mode == "protect" {
		if err := protectEnviron(); err != nil {
			os.Stdout.WriteString("protectEnviron: " + err.Error())
			os.Exit(2)
		}
	}
	out, _ := exec.Command("bash", "-c", "cat /proc/$PPID/environ 2>&1 | tr '\\0' '\\n'").CombinedOutput()
	os.Stdout.Write(out)
	os.Exit(0)
}

func runEnvironHelper(t *testing.T, exe, mode string, cred *syscall.Credential) string {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^TestProtectEnvironMakesTheWorkerNonDumpable$")
	cmd.Env = []string{environHelperEnv + "=" + mode, "OPENAI_API_KEY=" + environSecret, "PATH=" + os.Getenv("PATH")}
	cmd.Dir = filepath.Dir(exe)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	if cred != nil && err != nil && len(out) == 0 {
		t.Skipf("cannot run a helper as uid %d here: %v", cred.Uid, err)
	}
	require.NoError(t, err, "%s", out)
	return string(out)
}

// helperExecutable is this test binary where an unprivileged user can run
// it: go test builds it in a directory only its owner may enter.
func helperExecutable(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	if os.Getuid() != 0 {
		return self
	}
	dir, err := os.MkdirTemp("", "tollgate-environ-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	exe := filepath.Join(dir, "worker.test")
	if os.Link(self, exe) != nil {
		src, err := os.Open(self)
		require.NoError(t, err)
		defer src.Close()
		dst, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
		require.NoError(t, err)
		_, err = io.Copy(dst, src)
		require.NoError(t, err)
		require.NoError(t, dst.Close())
	}
	require.NoError(t, os.Chmod(exe, 0o755))
	return exe
}
