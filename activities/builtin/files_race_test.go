//go:build unix

package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// raceWorkspace makes ws/d/file.txt inside and, beside ws, an outside
// directory with the same layout holding a secret, so that ws/d swapped
// for a link to it turns every path under d into an escape.
func raceWorkspace(t *testing.T) (ws, outside string) {
	t.Helper()
	base := t.TempDir()
	ws, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "d"), 0o755))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "d", "file.txt"), []byte("inside\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "file.txt"), []byte("SECRET\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "only-outside.txt"), []byte("SECRET\n"), 0o644))
	return ws, outside
}

// requireOutsideUntouched checks that nothing was written outside.
func requireOutsideUntouched(t *testing.T, outside string) {
	t.Helper()
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"file.txt", "only-outside.txt"}, names, "nothing may be created outside the workspace")
	data, err := os.ReadFile(filepath.Join(outside, "file.txt"))
	require.NoError(t, err)
	require.Equal(t, "SECRET\n", string(data))
}

// TestFileToolsSymlinkSwapRace swaps ws/d for a link to an outside
// directory, back and forth, while read_file, list_dir and write_file run
// on paths under d. A check by path followed by an open by path loses
// this race within a few thousand calls; through os.Root no call may
// ever see or touch the outside.
func TestFileToolsSymlinkSwapRace(t *testing.T) {
	ws, outside := raceWorkspace(t)
	tools := testTools(t, Options{})
	call := tool.Call{Workspace: ws}
	d := filepath.Join(ws, "d")
	parked := filepath.Join(ws, "d-parked")
	// Both spellings of a link: os.Root refuses an absolute one outright
	// and must follow a relative one only while it stays beneath the root.
	links := []string{filepath.Join(ws, "link-abs"), filepath.Join(ws, "link-rel")}
	require.NoError(t, os.Symlink(outside, links[0]))
	require.NoError(t, os.Symlink(filepath.Join("..", "outside"), links[1]))

	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	var swaps atomic.Int64
	// place renames from to to; write_file may have recreated d (with
	// MkdirAll) while it was away, and that copy is thrown away.
	place := func(from, to string) error {
		err := os.Rename(from, to)
		for try := 0; err != nil && to == d && try < 100; try++ {
			// RemoveAll itself races with writes into the copy.
			if err = os.RemoveAll(d); err == nil {
				err = os.Rename(from, to)
			}
		}
		return err
	}
	// pause leaves each state in place a moment, so that calls see the
	// directory and the link about equally often.
	pause := func(i int) { time.Sleep(time.Duration(i%7) * 20 * time.Microsecond) }
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			link := links[i%2]
			for _, mv := range [][2]string{{d, parked}, {link, d}, {d, link}, {parked, d}} {
				if err := place(mv[0], mv[1]); err != nil {
					t.Errorf("swap: %v", err)
					return
				}
				if mv[1] == d {
					pause(i)
				}
			}
			swaps.Add(1)
		}
	})

	var leaks sync.Map
	leak := func(what string) { leaks.Store(what, true) }
	var calls, inside atomic.Int64
	loop := func(name string, args func(i int) any, check func(results.Outcome)) {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				raw, err := json.Marshal(args(i))
				if err != nil {
					t.Errorf("marshal: %v", err)
					return
				}
				c := call
				c.Arguments = raw
				// Internal errors are expected when d is missing mid-swap;
				// only what reaches the model or the disk matters here.
				out, err := tools[name].Run(context.Background(), c)
				calls.Add(1)
				if err == nil {
					check(out)
				}
			}
		})
	}
	text := func(out results.Outcome) string {
		var s strings.Builder
		if out.Success != nil {
			for _, p := range out.Success.Parts {
				s.WriteString(p.Text)
			}
		}
		if out.ToolError != nil {
			s.WriteString(out.ToolError.Message)
		}
		return s.String()
	}
	loop(ReadFile, func(int) any { return readFileArgs{Path: "d/file.txt"} }, func(out results.Outcome) {
		s := text(out)
		if strings.Contains(s, "SECRET") {
			leak("read_file returned the outside file")
		}
		if out.Kind == results.KindSuccess && strings.Contains(s, "inside") {
			inside.Add(1)
		}
	})
	loop(ListDir, func(int) any { return listDirArgs{Path: "d"} }, func(out results.Outcome) {
		if strings.Contains(text(out), "only-outside") {
			leak("list_dir listed the outside directory")
		}
	})
	loop(WriteFile, func(i int) any {
		if i%2 == 0 {
			return writeFileArgs{Path: "d/written.txt", Content: fmt.Sprint(i)}
		}
		return writeFileArgs{Path: "d/new/deep.txt", Content: fmt.Sprint(i)}
	}, func(results.Outcome) {
		if _, err := os.Lstat(filepath.Join(outside, "written.txt")); err == nil {
			leak("write_file wrote a file outside")
		}
		if _, err := os.Lstat(filepath.Join(outside, "new")); err == nil {
			leak("write_file created a directory outside")
		}
	})
	wg.Wait()

	var found []string
	leaks.Range(func(k, _ any) bool { found = append(found, k.(string)); return true })
	require.Empty(t, found, "after %d calls and %d swaps", calls.Load(), swaps.Load())
	requireOutsideUntouched(t, outside)
	require.Positive(t, swaps.Load())
	require.Positive(t, inside.Load(), "some reads must have succeeded for the race to mean anything")
	t.Logf("%d calls, %d swaps, %d reads inside", calls.Load(), swaps.Load(), inside.Load())
}

// TestRootGuardsAfterCheck makes the race deterministic: each path passes
// resolve, then d becomes a link to the outside before the file is
// opened. The check by path is stale by then; os.Root must refuse.
func TestRootGuardsAfterCheck(t *testing.T) {
	for _, link := range []struct {
		name   string
		target func(outside string) string
	}{
		{"absolute", func(outside string) string { return outside }},
		{"relative", func(string) string { return filepath.Join("..", "outside") }},
	} {
		t.Run(link.name, func(t *testing.T) {
			ws, outside := raceWorkspace(t)
			w, err := openFiles(tool.Call{Workspace: ws})
			require.NoError(t, err)
			defer w.close()
			resolve := func(p string) target {
				tg, err := w.resolve(p)
				require.NoError(t, err, p)
				return tg
			}
			file, dir, created, deep := resolve("d/file.txt"), resolve("d"), resolve("d/written.txt"), resolve("d/new/deep.txt")

			d := filepath.Join(ws, "d")
			require.NoError(t, os.Rename(d, filepath.Join(ws, "d-parked")))
			require.NoError(t, os.Symlink(link.target(outside), d))

			const want = "leads outside the workspace through a symbolic link"
			_, err = readFile(file, readFileArgs{}, Options{}.withDefaults())
			requireEscaped(t, err, want)
			_, err = listDir(dir)
			requireEscaped(t, err, want)
			_, _, err = readForChange(file, 0)
			requireEscaped(t, err, want)
			// As a preview reads it.
			_, _, err = readForChange(file, maxPreviewFileBytes)
			requireEscaped(t, err, want)
			requireEscaped(t, replaceFile(file, "pwned"), want)
			requireEscaped(t, replaceFile(created, "pwned"), want)
			requireEscaped(t, replaceFile(deep, "pwned"), want)
			requireOutsideUntouched(t, outside)
		})
	}
}

func requireEscaped(t *testing.T, err error, want string) {
	t.Helper()
	var te *toolError
	require.ErrorAs(t, err, &te)
	require.Contains(t, te.msg, want)
}
