package main

import (
	"context"
	"fmt"
)

// cmdReevaluate asks the turn to decide its calls waiting for approval
// again, under the workers' current approval rules, and prints what each
// call's re-evaluation did.
func (c *cli) cmdReevaluate(ctx context.Context, args []string) error {
	fs := c.flagSet("reevaluate")
	var by string
	fs.StringVar(&by, "by", "", "`name` recorded as who asked for the re-evaluation (default $USER, else cli)")
	id, t, err := c.turnArgs(ctx, fs, args)
	if err != nil {
		return err
	}
	defer t.Close()
	out, err := t.Reevaluate(ctx, id, c.responder(by))
	if err != nil {
		return err
	}
	if c.g.json {
		return writeJSON(c.stdout, out)
	}
	if len(out.Calls) == 0 {
		fmt.Fprintf(c.stdout, "no call of %s waits for approval\n", id)
		return nil
	}
	for _, r := range out.Calls {
		line := fmt.Sprintf("%s %s: %s (%s -> %s)", r.CallID, r.Tool, r.Outcome, r.Was, r.Now)
		if len(r.Dropped) > 0 {
			line += fmt.Sprintf("; approvals no longer counted: %v", r.Dropped)
		}
		fmt.Fprintln(c.stdout, line)
		fmt.Fprintln(c.stdout, "  "+r.Card.Summary())
	}
	return nil
}
