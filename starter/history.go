package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tollgate-dev/tollgate/internal/replay"
)

func (c *cli) cmdHistory(ctx context.Context, args []string) error {
	fs := c.flagSet("history")
	var run, out string
	fs.StringVar(&run, "run", "", "run `id` (default the latest run)")
	fs.StringVar(&out, "o", "", "write to `file` instead of stdout")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 1, 1, "ID"); err != nil {
		return err
	}
	id := pos[0]
	t, err := c.dial(ctx, c.g)
	if err != nil {
		return err
	}
	defer t.Close()
	if out == "" {
		return t.Export(ctx, id, run, c.stdout)
	}
	if err := writeFileAtomic(out, func(f *os.File) error { return t.Export(ctx, id, run, f) }); err != nil {
		return err
	}
	if c.g.json {
		return writeJSON(c.stdout, map[string]string{"workflow_id": id, "file": out})
	}
	fmt.Fprintf(c.stdout, "wrote the history of %s to %s (replay it with: starter replay %s)\n", id, out, out)
	return nil
}

// writeFileAtomic writes through a temporary file in the same directory
// and renames it into place, so a failed export never leaves half a
// history where a replay corpus expects a whole one.
func writeFileAtomic(name string, write func(*os.File) error) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Rename(f.Name(), name); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
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
