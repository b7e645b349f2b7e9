package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate-dev/tollgate/internal/atomicfile"
	"github.com/tollgate-dev/tollgate/replay"
)

func (c *cli) cmdHistory(ctx context.Context, args []string) error {
	fs := c.flagSet("history")
	var run, out string
	fs.StringVar(&run, "run", "", "run `id` (default the latest run)")
	fs.StringVar(&out, "o", "", "write to `file` instead of stdout")
	var all string
	fs.StringVar(&all, "all-runs", "", "write every run of a turn that continued as new into `dir`, as ID.json, ID.run2.json, ...")
	id, t, err := c.turnArgs(ctx, fs, args)
	if err != nil {
		return err
	}
	defer t.Close()
	if all != "" {
		if run != "" || out != "" {
			return &usageError{msg: "history: --all-runs writes every run; it does not go with --run or -o"}
		}
		return c.historyRuns(ctx, t, id, all)
	}
	if out == "" {
		return t.Export(ctx, id, run, c.stdout)
	}
	// Written whole or not at all: a failed export never leaves half a
	// history where a replay corpus expects a whole one.
	if err := atomicfile.WriteWith(out, func(w io.Writer) error { return t.Export(ctx, id, run, w) }, 0o644); err != nil {
		return err
	}
	if c.g.json {
		return writeJSON(c.stdout, map[string]string{"workflow_id": id, "file": out})
	}
	fmt.Fprintf(c.stdout, "wrote the history of %s to %s (replay it with: starter replay %s)\n", id, out, out)
	return nil
}

// historyRuns writes every run of turn id into dir.
func (c *cli) historyRuns(ctx context.Context, t turns, id, dir string) error {
	runs, err := t.Runs(ctx, id)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	files := make([]string, len(runs))
	for i, run := range runs {
		name := id + ".json"
		if i > 0 {
			name = fmt.Sprintf("%s.run%d.json", id, i+1)
		}
		files[i] = filepath.Join(dir, strings.ReplaceAll(name, "/", "_"))
		if err := atomicfile.WriteWith(files[i], func(w io.Writer) error { return t.Export(ctx, id, run, w) }, 0o644); err != nil {
			return err
		}
	}
	if c.g.json {
		return writeJSON(c.stdout, map[string]any{"workflow_id": id, "files": files})
	}
	fmt.Fprintf(c.stdout, "wrote %d runs of %s to %s (replay them with: starter replay %s)\n", len(runs), id, dir, dir)
	return nil
}

func (c *cli) cmdReplay(ctx context.Context, args []string) error {
	fs := c.flagSet("replay")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 1, -1, "FILE (a history exported by starter history or temporal workflow show --output json, or a directory of them)"); err != nil {
		return err
	}
	res := replay.Files(ctx, pos, replay.Options{DataDir: c.g.dataDir})
	failed := 0
	for _, r := range res {
		if !r.OK() {
			failed++
		}
	}
	if c.g.json {
		if err := writeJSON(c.stdout, res); err != nil {
			return err
		}
	} else {
		for _, r := range res {
			if r.OK() {
				fmt.Fprintf(c.stdout, "ok    %s (%d events)\n", r.Path, r.Events)
			} else {
				fmt.Fprintf(c.stdout, "FAIL  %s: %v\n", r.Path, r.Err)
			}
		}
		fmt.Fprintf(c.stdout, "%d of %d replayed cleanly\n", len(res)-failed, len(res))
	}
	if ctx.Err() != nil {
		return errInterrupted
	}
	if failed > 0 {
		return exitCode(exitFailed)
	}
	return nil
}
