package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode"

	"github.com/tollgate-dev/tollgate/internal/jail"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// timeoutGrace is how much longer the activity may run than a tool's own
// deadline, so that the tool's timeout fires first and the model gets a
// precise error (and the shell's output so far) rather than a bare
// activity timeout.
const timeoutGrace = 15 * time.Second

// pipeDrainWait bounds how long output is awaited after the command and
// its process group are gone, in case a process escaped the group (setsid)
// and holds the pipe open.
const pipeDrainWait = 2 * time.Second

// pwdTrap reports the shell's final directory on fd 3 however the command
// ends (including `exit`), without touching its stdout or exit status.
const pwdTrap = "trap 'pwd -P 2>/dev/null >&3' EXIT\n"

// shellContainment picks how calls are contained; tests pin each kind.
var shellContainment = bestContainment

type shellArgs struct {
	Command string `json:"command" jsonschema:"bash command line to run in the current directory"`
}

func shellTool(opts Options) (tool.Tool, error) {
	return tool.Func(tool.Spec{
		Name: Shell,
		Description: fmt.Sprintf("Run a bash command in the current directory of the workspace and return its combined stdout and stderr. "+
			"A non-zero exit status is an error that carries the output. Commands are killed after %s. %s "+
			"The environment holds PATH, HOME, the locale and what the operator allows, not the worker's credentials. "+
			"A final `cd` inside the workspace carries over to later calls.", opts.ShellTimeout, containmentDescription(shellContainment())),
		Approval:  tool.ApprovalAlways,
		Workspace: true,
		// Not idempotent: a command may have run when the worker died, so
		// it is never retried.
		Timeout: opts.ShellTimeout + timeoutGrace,
	}, func(ctx context.Context, call tool.Call, args shellArgs) (results.Outcome, error) {
		if strings.TrimSpace(args.Command) == "" {
			return results.FailTool("command is empty"), nil
		}
		w, err := openWorkspace(call)
		if err != nil {
			return outcome(err)
		}
		return runShell(ctx, w, args.Command, opts)
	})
}

// shellRun is what one command did.
type shellRun struct {
	output   string
	exitCode int
	signal   string
	timedOut bool
	finalDir string
	duration time.Duration
	total    int64
	dropped  int64
	// contained is how the call's processes were held together.
	contained containment
}

func runShell(ctx context.Context, w workspace, command string, opts Options) (results.Outcome, error) {
	var notes []string
	// A later command may have removed the directory an earlier one cd'ed
	// into; falling back to the root beats failing every call from now on.
	startDir, moved := w.cwd, false
	if !isDir(startDir) {
		notes = append(notes, fmt.Sprintf("note: the working directory %s no longer exists; ran in the workspace root", w.relCwd()))
		startDir, moved = w.root, true
	}

	run, err := execShell(ctx, startDir, command, opts, shellContainment())
	if err != nil {
		return results.Outcome{}, err
	}
	if run.contained == containProcessGroup {
		notes = append(notes, escapeNote)
	}
	output := strings.ToValidUTF8(run.output, "\uFFFD")
	limits := results.Limits{MaxBytes: tool.DefaultMaxOutputBytes, MaxLines: tool.DefaultMaxOutputLines}
	switch {
	case run.timedOut:
		msg, _ := results.Truncate(withNotes(fmt.Sprintf("timed out after %s; the command and its child processes were killed", opts.ShellTimeout), output, notes), limits)
		return results.FailTool("%s", msg), nil
	case run.signal != "":
		msg, _ := results.Truncate(withNotes("killed by signal "+run.signal, output, notes), limits)
		return results.FailTool("%s", msg), nil
	case run.exitCode != 0:
		msg, _ := results.Truncate(withNotes(fmt.Sprintf("exit status %d", run.exitCode), output, notes), limits)
		return results.FailTool("%s", msg), nil
	}

	newDir := ""
	if run.finalDir != "" {
		if host, ok := w.hostPath(run.finalDir); ok {
			if run.finalDir != startDir || moved {
				newDir = host
			}
		} else {
			notes = append(notes, fmt.Sprintf("note: the shell ended in %s, outside the workspace; the working directory stays %s", run.finalDir, w.relCwd()))
		}
	} else if moved {
		newDir = w.given
	}
	text := output
	if len(notes) > 0 {
		text = strings.TrimSuffix(output, "\n")
		if text != "" {
			text += "\n"
		}
		text += strings.Join(notes, "\n")
	}
	details, _ := json.Marshal(map[string]any{
		"exit_code":     run.exitCode,
		"duration_ms":   run.duration.Milliseconds(),
		"output_bytes":  run.total,
		"dropped_bytes": run.dropped,
		"containment":   run.contained.String(),
	})
	out := results.SucceedText(text).WithDetails(details)
	if newDir != "" {
		out = out.WithWorkDir(newDir)
	}
	return out, nil
}

func withNotes(head, output string, notes []string) string {
	parts := append([]string{head}, notes...)
	if output != "" {
		parts = append(parts, output)
	}
	return strings.Join(parts, "\n")
}

// execShell runs command under bash, contained as well as the worker
// allows starting at want, capturing combined output through one pipe so
// stdout and stderr interleave as a terminal would show them.
func execShell(ctx context.Context, dir, command string, opts Options, want containment) (shellRun, error) {
	pwdFile, err := os.CreateTemp("", "tollgate-pwd-*")
	if err != nil {
		return shellRun{}, fmt.Errorf("shell: create pwd file: %w", err)
	}
	defer os.Remove(pwdFile.Name())
	defer pwdFile.Close()

	pr, pw, err := os.Pipe()
	if err != nil {
		return shellRun{}, fmt.Errorf("shell: create output pipe: %w", err)
	}
	defer pr.Close()

	runCtx, cancel := context.WithTimeout(ctx, opts.ShellTimeout)
	defer cancel()
	env := shellEnv(os.Environ(), opts.ShellEnv)

	cmd, j, used, err := startContained(runCtx, dir, pwdTrap+command, env, pw, pwdFile, want)
	pw.Close()
	if err != nil {
		return shellRun{}, err
	}
	start := time.Now()
	defer j.Release()

	buf := newCapBuffer(opts.MaxShellOutput)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(buf, pr)
	}()
	waitErr := cmd.Wait()
	duration := time.Since(start)
	// The shell is gone; whatever it left running goes with it, so the
	// call has no effects after it has returned.
	j.Kill()
	select {
	case <-copied:
	case <-time.After(pipeDrainWait):
		pr.Close()
		<-copied
	}

	run := shellRun{duration: duration, total: buf.total, contained: used}
	run.output, run.dropped = buf.String()
	if ctx.Err() != nil {
		return shellRun{}, fmt.Errorf("shell: %w", ctx.Err())
	}
	if errors.Is(runCtx.Err(), context.DeadlineExceeded) {
		run.timedOut = true
		return run, nil
	}
	var exitErr *exec.ExitError
	switch {
	case errors.As(waitErr, &exitErr):
		run.exitCode = exitErr.ExitCode()
		if run.exitCode < 0 {
			run.signal = signalOf(exitErr.ProcessState)
		}
	case waitErr != nil:
		return shellRun{}, fmt.Errorf("shell: wait for bash: %w", waitErr)
	}
	if pwd, err := os.ReadFile(pwdFile.Name()); err == nil {
		lines := strings.Split(strings.TrimSpace(string(pwd)), "\n")
		run.finalDir = strings.TrimSpace(lines[len(lines)-1])
	}
	return run, nil
}

// startContained starts bash on script, writing to out, in a jail of the
// first containment from want on that works.
func startContained(ctx context.Context, dir, script string, env []string, out, pwdFile *os.File, want containment) (*exec.Cmd, jail.Jail, containment, error) {
	cmd, j, used, err := jail.Start(jail.Fallbacks(want), "shell", func() *exec.Cmd {
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = env
		// Passing *os.File makes the child write straight into the pipe:
		// no copying goroutine inside exec for Wait to block on while a
		// background process keeps the pipe open.
		cmd.Stdout, cmd.Stderr = out, out
		cmd.ExtraFiles = []*os.File{pwdFile}
		return cmd
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("shell: start bash: %w", err)
	}
	return cmd, j, used, nil
}

// shellEnvNames is what every command sees of the worker's environment:
// enough for tools to find programs, a home, a locale and a time zone.
// Anything else may be a secret (DATABASE_URL, SENTRY_DSN, a model key),
// and a denylist of names cannot know them all, so the operator names
// the rest (Options.ShellEnv).
var shellEnvNames = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR"}

// shellEnvFixed overrides whatever the worker has: nothing can be typed at
// a prompt or scrolled in a pager here.
var shellEnvFixed = []string{"TERM=dumb", "PAGER=cat", "GIT_PAGER=cat", "GIT_TERMINAL_PROMPT=0"}

// shellEnv keeps the variables of environ named by shellEnvNames or extra
// (where a trailing * matches a prefix) and adds shellEnvFixed, which win
// over the worker's own.
func shellEnv(environ, extra []string) []string {
	var own []string
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); !fixedEnv(name) {
			own = append(own, kv)
		}
	}
	return append(tool.AllowedEnv(own, shellEnvNames, extra), shellEnvFixed...)
}

func fixedEnv(name string) bool {
	for _, kv := range shellEnvFixed {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// ParseShellEnv splits a list of variable names, as TOLLGATE_SHELL_ENV
// holds them (separated by commas or spaces), for Options.ShellEnv.
func ParseShellEnv(list string) []string {
	return strings.FieldsFunc(list, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// capBuffer keeps the first and last halves of at most max bytes of
// output; the start shows what the command did and the end how it ended.
type capBuffer struct {
	headCap, tailCap int
	head, tail       []byte
	total            int64
}

func newCapBuffer(max int) *capBuffer {
	return &capBuffer{headCap: max / 2, tailCap: max - max/2}
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.total += int64(len(p))
	n := len(p)
	if room := b.headCap - len(b.head); room > 0 {
		take := min(room, len(p))
		b.head = append(b.head, p[:take]...)
		p = p[take:]
	}
	if len(p) > 0 {
		b.tail = append(b.tail, p...)
		// Compact now and then rather than on every write.
		if len(b.tail) > 2*b.tailCap {
			b.tail = append(b.tail[:0:0], b.tail[len(b.tail)-b.tailCap:]...)
		}
	}
	return n, nil
}

// String returns the kept output and how many bytes were dropped from
// its middle.
func (b *capBuffer) String() (string, int64) {
	tail := b.tail
	if len(tail) > b.tailCap {
		tail = tail[len(tail)-b.tailCap:]
	}
	dropped := b.total - int64(len(b.head)) - int64(len(tail))
	if dropped == 0 {
		return string(b.head) + string(tail), 0
	}
	return fmt.Sprintf("%s\n[... %d bytes of output dropped ...]\n%s", b.head, dropped, tail), dropped
}
