// Command starter is Tollgate's command-line client: it starts agent turns,
// answers their approvals, questions and connection requests, watches
// them, and exports and replays their histories. Everything it does goes
// through the contract in workflows/contract.go (the AgentTurn workflow,
// the respond Update and Signal, the state Query), so the official
// Temporal CLI and UI can do the same to the same turns.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/workflows"
)

// Exit codes. Scripts branch on them, so they are part of the interface.
const (
	exitOK = 0
	// exitFailed: an error, a failed replay, or a turn that ended failed,
	// cancelled, at max_steps or budget_exhausted.
	exitFailed = 1
	// exitRejected: a usage error, or a response the turn rejected.
	exitRejected = 2
	// exitTransferred: the turn handed the conversation to another agent.
	// Not a failure, but not the answer either: the caller decides.
	exitTransferred = 3
	// exitInterrupted: Ctrl-C. Only the client stopped; the turn goes on.
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	flush := startTracing(ctx, os.Stderr)
	code := runCLI(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	flush()
	stop()
	os.Exit(code)
}

// runCLI runs one command line and returns the exit code. It is main
// without the process: tests and the end-to-end suite drive it directly.
func runCLI(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newCLI(stdin, stdout, stderr, os.Getenv)
	return c.run(ctx, args)
}

// cli holds one invocation's streams, flags and seams for tests.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	g              globals
	// dial connects to Temporal; tests replace it with a fake.
	dial func(ctx context.Context, g globals) (turns, error)
	// poll is how often watch and run --interactive query the state:
	// Temporal has no push for queries, and 300ms feels live to a person
	// without loading the server.
	poll time.Duration
	// nudge, while a turn's events stream, says a card changed (live.go).
	nudge chan struct{}
	// getenv is os.Getenv, replaceable in tests.
	getenv func(string) string
	// fs is the running verb's flag set, for its help text.
	fs *flag.FlagSet
}

func newCLI(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *cli {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, dial: dialTemporal, poll: 300 * time.Millisecond, getenv: getenv}
	c.g = globals{
		taskQueue: cmp.Or(c.getenv("TOLLGATE_TASK_QUEUE"), workflows.DefaultTaskQueue),
		dataDir:   datadir.FromEnv(c.getenv),
	}
	return c
}

// globals are the flags every verb accepts, before or after the verb.
type globals struct {
	address   string
	namespace string
	profile   string
	taskQueue string
	dataDir   string
	json      bool
}

// register adds the global flags to fs with their current values as
// defaults, so a verb's flag set neither resets what was parsed before
// the verb nor forgets the environment.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.address, "address", g.address, "Temporal frontend `host:port` (default TEMPORAL_ADDRESS or 127.0.0.1:7233)")
	fs.StringVar(&g.namespace, "namespace", g.namespace, "Temporal `namespace` (default TEMPORAL_NAMESPACE or default)")
	fs.StringVar(&g.profile, "profile", g.profile, "temporal.toml `profile` (default TEMPORAL_PROFILE or default)")
	fs.StringVar(&g.taskQueue, "task-queue", g.taskQueue, "task `queue` new turns run on (TOLLGATE_TASK_QUEUE)")
	fs.StringVar(&g.dataDir, "data", g.dataDir, "data `directory` with externally stored payloads (TOLLGATE_DATA)")
	fs.BoolVar(&g.json, "json", g.json, "machine-readable output on stdout")
}

// verb is one subcommand.
type verb struct {
	name    string
	args    string
	short   string
	example string
	run     func(c *cli, ctx context.Context, args []string) error
}

// verbs is the order usage lists them in.
var verbs = []verb{
	{"run", `[flags] "prompt"`, "start a turn; --wait waits for its result, --interactive answers it here",
		`starter run --interactive "Summarise notes.txt into summary.md"`, (*cli).cmdRun},
	{"chat", "[--session ID] [flags]", "talk with an agent over many turns (a session); answer its approvals here; --session resumes one", "starter chat --model openai:gpt-4.1 --tools read_file", (*cli).cmdChat},
	{"agents", "", "list the named agents the workers of the task queue offer (their --agents file)",
		"starter agents", (*cli).cmdAgents},
	{"state", "ID", "print the turn's status and every call's card",
		"starter state tollgate-3f2a9c01", (*cli).cmdState},
	{"list", "[--waiting] [--user U] [--children | --parent ID] [--limit N]", "list turns, newest first, with the calls each waits on (the Tollgate search attributes)",
		"starter list --waiting", (*cli).cmdList},
	{"watch", "ID", "print each card as it changes until the turn ends, then the result",
		"starter watch tollgate-3f2a9c01", (*cli).cmdWatch},
	{"approve", "ID CALL", "approve a call pending approval (--args JSON runs it with edited arguments)",
		"starter approve tollgate-3f2a9c01 call_write_summary", (*cli).cmdApprove},
	{"deny", "ID CALL --reason R", "refuse a call pending approval; the model is told not to retry",
		`starter deny tollgate-3f2a9c01 call_write_summary --reason "not that file"`, (*cli).cmdDeny},
	{"answer", "ID CALL ANSWER", "answer a question, or pick an option by id (sent as a JSON string unless --json-answer)",
		"starter answer tollgate-3f2a9c01 call_ask_tone friendly", (*cli).cmdAnswer},
	{"connected", "ID CALL", "say the account connection a call waits for is made; the tool runs again",
		"starter connected tollgate-3f2a9c01 call_list_issues", (*cli).cmdConnected},
	{"connect", "PROVIDER [--user U] [--token-env VAR]", "store an account token for a provider in the data directory (dev; the token is read from stdin)",
		"GITHUB_TOKEN=... starter connect github --token-env GITHUB_TOKEN", (*cli).cmdConnect},
	{"disconnect", "PROVIDER [--user U] [--oauth-providers FILE]", "forget a user's connection in the data directory, revoking an OAuth token at its provider",
		"starter disconnect github", (*cli).cmdDisconnect},
	{"connections", "migrate", "seal the plain token files of the data directory's connection store with the codec keys (once, when encryption is turned on)",
		"TOLLGATE_CODEC_KEYS_FILE=tollgate-keys starter connections migrate", (*cli).cmdConnections},
	{"grants", "list|revoke ID [--user U]", "list a user's remembered approvals (approve --remember), or revoke one so its calls ask again",
		"starter grants list --user ann", (*cli).cmdGrants},
	{"reevaluate", "ID [--by NAME]", "decide the turn's calls waiting for approval again under the workers' current approval rules: allowed calls run, denied ones are refused",
		"starter reevaluate tollgate-3f2a9c01", (*cli).cmdReevaluate},
	{"cancel", "ID [CALL]", "with CALL, end that call's wait; without, cancel the whole turn",
		"starter cancel tollgate-3f2a9c01", (*cli).cmdCancel},
	{"raw", "ID CALL", "print a call's whole output, which the card may only reference when it is large",
		"starter raw tollgate-3f2a9c01 call_shell_1 > output.txt", (*cli).cmdRaw},
	{"history", "ID [-o FILE]", "export the turn's history as `temporal workflow show --output json` does",
		"starter history tollgate-3f2a9c01 -o turn.json", (*cli).cmdHistory},
	{"replay", "FILE|DIR...", "replay exported histories against this build's workflow code",
		"starter replay workflows/testdata/histories", (*cli).cmdReplay},
}

func findVerb(name string) *verb {
	for i := range verbs {
		if verbs[i].name == name {
			return &verbs[i]
		}
	}
	return nil
}

func (c *cli) run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("starter", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.g.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage(c.stdout)
			return exitOK
		}
		fmt.Fprintf(c.stderr, "starter: %v\n\n", err)
		c.usage(c.stderr)
		return exitRejected
	}
	if fs.NArg() == 0 {
		c.usage(c.stderr)
		return exitRejected
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		if len(rest) == 0 {
			c.usage(c.stdout)
			return exitOK
		}
		name, rest = rest[0], []string{"-h"}
	}
	v := findVerb(name)
	if v == nil {
		fmt.Fprintf(c.stderr, "starter: unknown verb %q (starter help lists them)\n", name)
		return exitRejected
	}
	return c.exit(v, v.run(c, ctx, rest))
}

// exit turns a verb's error into the exit code and the message a person
// reads on stderr.
func (c *cli) exit(v *verb, err error) int {
	var (
		usage    *usageError
		rejected *rejectedError
		code     exitCode
	)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		c.verbHelp(v)
		return exitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &usage):
		fmt.Fprintf(c.stderr, "starter %s: %s\nusage: starter %s %s   (starter help %s)\n", v.name, usage.msg, v.name, v.args, v.name)
		return exitRejected
	case errors.As(err, &rejected):
		fmt.Fprintf(c.stderr, "rejected: %s\n", rejected.msg)
		return exitRejected
	case errors.Is(err, errInterrupted):
		fmt.Fprintln(c.stderr, err)
		return exitInterrupted
	}
	fmt.Fprintf(c.stderr, "starter %s: %v\n", v.name, err)
	return exitFailed
}

// usageError is a command line that does not make sense; exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// rejectedError is the turn's validator saying no; exit 2 with its
// sentence, which says why.
type rejectedError struct{ msg string }

func (e *rejectedError) Error() string { return "rejected: " + e.msg }

// exitCode ends the command with a code; whatever needed saying has been
// printed already (a turn's final status, a replay report).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// errInterrupted wraps context cancellation from Ctrl-C, with what it
// means for the turn.
var errInterrupted = errors.New("interrupted: the client stopped, the turn itself keeps running")

// flagSet is a verb's flag set with the global flags. It prints nothing
// itself: exit prints errors to stderr and -h help to stdout.
func (c *cli) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("starter "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	c.g.register(fs)
	c.fs = fs
	return fs
}

// verbHelp prints one verb's synopsis, example and flags.
func (c *cli) verbHelp(v *verb) {
	w := c.stdout
	fmt.Fprintf(w, "usage: starter %s %s\n\n%s.\n\nexample:\n  %s\n", v.name, v.args, v.short, v.example)
	if c.fs == nil {
		return
	}
	// The verb's own flags; the global ones are listed once, in
	// `starter help`.
	own := flag.NewFlagSet("", flag.ContinueOnError)
	global := flag.NewFlagSet("", flag.ContinueOnError)
	(&globals{}).register(global)
	c.fs.VisitAll(func(f *flag.Flag) {
		if global.Lookup(f.Name) == nil {
			own.Var(f.Value, f.Name, f.Usage)
		}
	})
	fmt.Fprintf(w, "\nflags (and the global flags in starter help):\n")
	own.SetOutput(w)
	own.PrintDefaults()
}

// parse parses flags wherever they sit among the positional arguments
// (`approve ID CALL --by ann` as well as `approve --by ann ID CALL`); the
// standard flag package alone stops at the first positional one. A bare
// "--" ends the flags.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{msg: err.Error()}
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// positional checks the count of positional arguments.
func positional(args []string, min, max int, names string) error {
	if len(args) < min {
		return usagef("missing %s", names)
	}
	if max >= 0 && len(args) > max {
		return usagef("unexpected argument %q", args[max])
	}
	return nil
}

// turnArgs is the start of the verbs that act on one turn (state, watch,
// history, reevaluate): their flags, the turn's id as the one positional
// argument, and a connection the caller closes.
func (c *cli) turnArgs(ctx context.Context, fs *flag.FlagSet, args []string) (string, turns, error) {
	pos, err := parse(fs, args)
	if err != nil {
		return "", nil, err
	}
	if err := positional(pos, 1, 1, "ID"); err != nil {
		return "", nil, err
	}
	t, err := c.dial(ctx, c.g)
	if err != nil {
		return "", nil, err
	}
	return pos[0], t, nil
}

func (c *cli) usage(w io.Writer) {
	var b strings.Builder
	b.WriteString(`starter is the Tollgate command-line client: it starts agent turns, answers
their approvals, questions and connection requests, watches them, and exports
and replays their histories.

usage: starter [global flags] VERB [flags] [args]

verbs:
`)
	for _, v := range verbs {
		fmt.Fprintf(&b, "  %-9s %s\n            %s\n            e.g. %s\n", v.name, v.args, v.short, v.example)
	}
	b.WriteString(`  help      [VERB]
            this text, or one verb's flags

global flags (before or after the verb):
  --address HOST:PORT  Temporal frontend (default TEMPORAL_ADDRESS or 127.0.0.1:7233)
  --namespace NS       Temporal namespace (default TEMPORAL_NAMESPACE or default)
  --profile NAME       temporal.toml profile (default TEMPORAL_PROFILE or default);
                       TLS and API keys come from Temporal's usual TEMPORAL_* variables
  --task-queue NAME    task queue new turns run on (TOLLGATE_TASK_QUEUE, default tollgate)
  --data DIR           data directory whose payload store holds large payloads
                       (TOLLGATE_DATA, default .tollgate; the worker's, when shared)
  --json               machine-readable stdout: one JSON document per command;
                       watch and run --interactive write JSON lines, the last
                       one {"type":"result",...}

responding: approve, deny, answer, connected and cancel ID CALL send the respond
Update and print the call's new card. A response the turn rejects prints the
reason and exits 2. --signal sends the respond Signal instead: fire and forget,
and an invalid signal is dropped and counted in the state. --by NAME records who
answered (default $USER, else "cli").

exit codes:
  0    done; for run --wait, run --interactive and watch: the turn completed
  1    an error (Temporal unreachable, no such turn, ...), a history that does
       not replay, or a turn that ended failed, cancelled, at max_steps or
       budget_exhausted
  2    a usage error, or the turn rejected the response
  3    the turn ended by transferring to another agent
  130  interrupted; only the client stopped, the turn keeps running

the official Temporal CLI works on the same turns:
  temporal workflow query --type state --workflow-id ID
  temporal workflow update execute --name respond --workflow-id ID \
      --input '{"call_id":"call_write_summary","decision":"approve"}'
  temporal workflow signal --name respond --workflow-id ID \
      --input '{"call_id":"call_write_summary","decision":"deny","reason":"no"}'
  temporal workflow cancel --workflow-id ID
  temporal workflow show --workflow-id ID --output json > turn.json
`)
	io.WriteString(w, b.String())
}
