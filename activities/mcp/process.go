package mcp

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-dev/tollgate/internal/jail"
	"github.com/tollgate-dev/tollgate/tool"
)

// stdinGrace is how long a server may take to exit once its stdin is
// closed before its jail is killed. MCP asks servers to exit on end of
// input; one that does not loses nothing by being killed, since the call
// is over.
const stdinGrace = time.Second

// containment picks how servers' processes are held together: as the
// shell tool's are (package jail). Tests pin each kind.
var containment = jail.Best

// baseEnv is what every stdio server sees of the worker's environment:
// enough to find programs, a home, a locale and a time zone. Anything
// else may be a secret (a model key, a database URL), so the operator
// names the rest in the server's "env".
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR"}

// serverEnv keeps the variables of environ named by baseEnv or extra
// (NAME_* matches a prefix).
func serverEnv(environ, extra []string) []string {
	return tool.AllowedEnv(environ, baseEnv, extra)
}

// process is one stdio server, started for one session, in a jail of its
// own with everything it starts.
type process struct {
	cmd    *exec.Cmd
	jail   jail.Jail
	stdin  *os.File
	stdout *os.File
	stderr *tailBuffer
	exited chan struct{}
	once   sync.Once
}

// startProcess starts the server in a jail, with pipes for stdin and
// stdout. Stderr is kept (its end) for the logs.
func startProcess(command string, args []string, dir string, env []string) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("create stdout pipe: %w", err)
	}
	p := &process{stdin: inW, stdout: outR, stderr: &tailBuffer{max: 8 << 10}, exited: make(chan struct{})}
	cmd, j, _, err := jail.StartProgram(jail.Fallbacks(containment()), "mcp", func() *exec.Cmd {
		cmd := exec.Command(command, args...)
		cmd.Dir = dir
		cmd.Env = env
		// Should a process hold stderr open after the jail was killed
		// (it cannot, unless containment is a process group only), Wait
		// gives up on it after this long rather than never returning.
		cmd.WaitDelay = stdinGrace
		// Passing *os.File hands the child the pipe ends directly, so no
		// copy goroutine inside exec keeps Wait from returning while a
		// grandchild holds them.
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, p.stderr
		dieWithWorker(cmd)
		return cmd
	})
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start %s: %w", command, err)
	}
	p.cmd, p.jail = cmd, j
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop ends the server: stdin closes (the MCP way to ask it to exit),
// then after a grace period its jail is killed, whether the server exited
// or not, so nothing it started outlives the call.
func (p *process) stop() {
	p.once.Do(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(stdinGrace):
		}
		p.jail.Kill()
		<-p.exited
		p.stdout.Close()
		p.jail.Release()
	})
}

// kill ends the server and all it started at once: the worker is
// shutting down or the call was cancelled.
func (p *process) kill() {
	p.jail.Kill()
	p.stop()
}

// Stderr returns the end of what the server wrote to stderr.
func (p *process) Stderr() string { return p.stderr.String() }

// stdioReader and stdioWriter are the process's pipes as the SDK's
// IOTransport wants them: closing the connection stops the process.
type stdioReader struct {
	p *process
	// budget is what the session may still receive; line bounds one
	// message (a line of JSON), line counting what the current one has.
	budget, maxLine, line int64
	over                  *atomic.Bool
	// tap, when set, gets a copy of what is received.
	tap io.Writer
}

func (r *stdioReader) Read(b []byte) (int, error) {
	n, err := r.p.stdout.Read(b)
	for _, c := range b[:n] {
		r.line++
		if c == '\n' {
			r.line = 0
		}
		if r.line > r.maxLine {
			break
		}
	}
	if r.budget -= int64(n); r.budget < 0 || r.line > r.maxLine {
		r.over.Store(true)
		return 0, fmt.Errorf("read from the server: %w", errTooLarge)
	}
	if n > 0 && r.tap != nil {
		_, _ = r.tap.Write(b[:n])
	}
	return n, err
}

func (r *stdioReader) Close() error { r.p.stop(); return nil }

type stdioWriter struct{ p *process }

func (w stdioWriter) Write(b []byte) (int, error) { return w.p.stdin.Write(b) }
func (w stdioWriter) Close() error                { return nil }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

var _ io.Writer = (*tailBuffer)(nil)

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
