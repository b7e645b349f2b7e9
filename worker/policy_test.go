package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// workerMainEnv makes the test binary run the worker's main with the
// arguments in workerArgsEnv, so tests see what the binary does: its exit
// code and what it writes.
const (
	workerMainEnv = "TOLLGATE_TEST_WORKER_MAIN"
	workerArgsEnv = "TOLLGATE_TEST_WORKER_ARGS"
)

func TestMain(m *testing.M) {
	if os.Getenv(workerMainEnv) == "1" {
		os.Args = append([]string{"worker"}, strings.Split(os.Getenv(workerArgsEnv), "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A bad policy file stops the worker at once, non-zero, with the
// sentence, before it starts or dials any server.
func TestWorkerRefusesABadPolicyFile(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	for name, tc := range map[string]struct{ file, want string }{
		"deny without reason": {"rules:\n  - name: quiet\n    action: deny\n", `rule \"quiet\" denies without a reason`},
		"when does not parse": {"rules:\n  - name: broken\n    when: args.path.startsWith(\n    action: allow\n", `rule \"broken\": when does not parse`},
		"unknown field":       {"rules:\n  - name: typo\n    acton: allow\n", `field acton not found`},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.file), 0o600))
			cmd := exec.Command(exe)
			// An address nothing listens on: the worker must stop before
			// it would dial.
			cmd.Env = append(os.Environ(), workerMainEnv+"=1", workerArgsEnv+"="+strings.Join([]string{
				"--policy", path, "--data", filepath.Join(dir, "data"), "--workspace", filepath.Join(dir, "ws"), "--address", "127.0.0.1:1",
			}, "\n"))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, string(out))
			require.Equal(t, 1, exit.ExitCode(), string(out))
			// The log is logfmt, which escapes the sentence's quotes.
			require.Contains(t, string(out), tc.want)
		})
	}
}
