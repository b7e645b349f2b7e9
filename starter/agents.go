package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/tollgate-dev/tollgate/workflows"
)

func (c *cli) cmdAgents(ctx context.Context, args []string) error {
	fs := c.flagSet("agents")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 0, 0, ""); err != nil {
		return err
	}
	t, err := c.dial(ctx, c.g)
	if err != nil {
		return err
	}
	defer t.Close()
	agents, err := t.Agents(ctx, c.g.taskQueue)
	if err != nil {
		return err
	}
	if c.g.json {
		return writeJSON(c.stdout, agents)
	}
	printAgents(c.stdout, c.g.taskQueue, agents)
	return nil
}

// printAgents is one line per agent: what it runs and whom it calls.
func printAgents(w io.Writer, queue string, agents []workflows.AgentInfo) {
	if len(agents) == 0 {
		fmt.Fprintf(w, "The workers of task queue %s offer no named agents (start one with --agents FILE).\n", queue)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tMODEL\tTOOLS\tHANDOFFS\tDESCRIPTION")
	for _, a := range agents {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Name, a.Model, dash(strings.Join(a.Tools, ",")), dash(strings.Join(a.Handoffs, ",")), a.Description)
	}
	tw.Flush()
}
