package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/tollgate-dev/tollgate/internal/turnlist"
	"github.com/tollgate-dev/tollgate/workflows"
)

// lister finds turns through visibility; the Temporal connection is one.
type lister interface {
	List(ctx context.Context, f turnlist.Filter) ([]turnlist.Turn, error)
}

// List runs the same visibility query as the gateway's GET /v1/turns.
func (t *temporalTurns) List(ctx context.Context, f turnlist.Filter) ([]turnlist.Turn, error) {
	turns, err := turnlist.List(ctx, t.c, f)
	var invalid *serviceerror.InvalidArgument
	if errors.As(err, &invalid) && (f.Status != "" || f.User != "") {
		return nil, fmt.Errorf("the server cannot filter turns by status or user: are Tollgate's search attributes registered in namespace %s (worker --dev does it; see docs/turns.md)? %w", t.namespace, err)
	}
	if err != nil {
		return nil, t.explain(err, "", "list turns")
	}
	return turns, nil
}

func (c *cli) cmdList(ctx context.Context, args []string) error {
	fs := c.flagSet("list")
	var f turnlist.Filter
	waiting := fs.Bool("waiting", false, "only turns waiting for a person (--status waiting)")
	status := fs.String("status", "", "only turns with this `status`: running, waiting, completed, failed, cancelled, transferred, max_steps, budget_exhausted")
	fs.StringVar(&f.User, "user", "", "only turns of this `user`")
	fs.StringVar(&f.Parent, "parent", "", "only the turns of the agents turn `ID` called as tools")
	fs.BoolVar(&f.Children, "children", false, "list the turns of called agents too (left out by default: they show under their caller)")
	fs.IntVar(&f.Limit, "limit", turnlist.DefaultLimit, fmt.Sprintf("at most `N` turns, newest first (at most %d)", turnlist.MaxLimit))
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 0, 0, ""); err != nil {
		return err
	}
	f.Status = workflows.Status(*status)
	if *waiting {
		if *status != "" && *status != string(workflows.StatusWaiting) {
			return usagef("--waiting and --status %s contradict each other", *status)
		}
		f.Status = workflows.StatusWaiting
	}
	if f.Limit < 1 {
		return usagef("--limit must be at least 1")
	}
	if err := f.Check(); err != nil {
		return usagef("%v", err)
	}
	t, err := c.dial(ctx, c.g)
	if err != nil {
		return err
	}
	defer t.Close()
	l, ok := t.(lister)
	if !ok {
		return errors.New("this connection cannot list turns")
	}
	turns, err := l.List(ctx, f)
	if err != nil {
		return err
	}
	if c.g.json {
		return writeJSON(c.stdout, map[string]any{"turns": turns})
	}
	printTurns(c.stdout, turns)
	return nil
}

// printTurns is one line per turn: what it is, whose, and what it waits
// for.
func printTurns(w io.Writer, turns []turnlist.Turn) {
	if len(turns) == 0 {
		fmt.Fprintln(w, "no turns")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tUSER\tWAITING CALLS\tTOOLS\tSTARTED")
	for _, t := range turns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Status, dash(t.User),
			dash(strings.Join(t.WaitingCalls, ",")), dash(strings.Join(t.WaitingTools, ",")),
			t.StartTime.Local().Format(time.DateTime))
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
